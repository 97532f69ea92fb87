import {
	NodeApiError,
	NodeConnectionTypes,
	NodeOperationError,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { ASK_TOOL_DESCRIPTION, properties } from './description';
import { multipart } from './multipart';
import { callWorker, CREDENTIAL } from './transport';

interface Chunk {
	source: number | null;
	document_id: string;
	document_name: string;
	document_type: string;
	section_path: string;
	page_number: number | null;
	is_binding: boolean;
	superseded_by: string | null;
	amended_by: string | null;
	effective_date?: string | null;
	replaced?: IDataObject | null;
	final_score: number;
}

/** The answer as an agent should read it: the status, what it means, the context, the sources. */
function forTheAgent(answer: IDataObject): IDataObject {
	const chunks = (answer.chunks ?? []) as Chunk[];
	const sources = chunks
		.filter((chunk) => chunk.source !== null && chunk.source !== undefined)
		.sort((a, b) => Number(a.source) - Number(b.source))
		.map((chunk) => ({
			source: chunk.source,
			document_id: chunk.document_id,
			document_name: chunk.document_name,
			document_type: chunk.document_type,
			section: chunk.section_path,
			page: chunk.page_number,
			binding: chunk.is_binding,
			superseded_by: chunk.superseded_by,
			amended_by: chunk.amended_by,
			effective_date: chunk.effective_date ?? null,
			replaced: chunk.replaced ?? null,
			score: chunk.final_score,
		}));
	return {
		status: answer.status,
		message: answer.message ?? null,
		context: answer.context,
		sources,
		community: answer.community ?? null,
		request_id: answer.request_id ?? null,
	};
}

function text(value: unknown): string {
	return String(value ?? '').trim();
}

export class ArcRetrieval implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'ARC Retrieval',
		name: 'arcRetrieval',
		icon: { light: 'file:../../icons/arc.svg', dark: 'file:../../icons/arc.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{$parameter["operation"]}}',
		description: ASK_TOOL_DESCRIPTION,
		defaults: {
			name: 'ARC Retrieval',
		},
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{
				name: CREDENTIAL,
				required: true,
			},
		],
		properties,
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const returned: INodeExecutionData[] = [];
		for (let i = 0; i < items.length; i++) {
			try {
				const json = await runOperation.call(this, i);
				const rows = Array.isArray(json) ? json : [json];
				for (const row of rows) {
					returned.push({ json: row, pairedItem: { item: i } });
				}
			} catch (error) {
				if (this.continueOnFail()) {
					// {error: {...}} alone is what n8n routes to the error output ("On Error: Continue
					// (using error output)"); http_code is the worker's status, null when not reached
					const failure = error as NodeApiError;
					returned.push({
						json: {
							error: {
								message: failure.message,
								description: failure.description ?? null,
								http_code: failure.httpCode ? Number(failure.httpCode) : null,
							},
						},
						pairedItem: { item: i },
					});
					continue;
				}
				// the worker's refusals keep their status code; anything else becomes an operation error
				throw error instanceof NodeApiError
					? error
					: new NodeOperationError(this.getNode(), error as Error, { itemIndex: i });
			}
		}
		return [returned];
	}
}

async function runOperation(this: IExecuteFunctions, i: number): Promise<IDataObject | IDataObject[]> {
	const operation = this.getNodeParameter('operation', i) as string;
	const community = text(this.getNodeParameter('community', i, ''));
	const options = this.getNodeParameter('options', i, {}) as IDataObject;
	const retries = Number(options.retries ?? 3);
	const qs: IDataObject = community ? { community } : {};

	if (operation === 'ask') {
		const query = text(this.getNodeParameter('query', i));
		if (!query) {
			throw new NodeOperationError(this.getNode(), 'Query is empty: give the question to ask', { itemIndex: i });
		}
		const body: IDataObject = {
			query,
			binding_only: this.getNodeParameter('bindingOnly', i, false) as boolean,
			top_k: this.getNodeParameter('topK', i, 8) as number,
		};
		const types = this.getNodeParameter('documentTypes', i, []) as string[];
		if (types.length) body.document_types = types;
		if (community) body.community = community;
		const asOf = text(this.getNodeParameter('asOf', i, ''));
		if (asOf) body.as_of = asOf;
		const answer = await callWorker.call(this, { method: 'POST', path: '/webhook/arc-retrieval', body, retries }, i);
		return options.fullAnswer ? answer : forTheAgent(answer);
	}

	if (operation === 'ingest') {
		const property = this.getNodeParameter('binaryPropertyName', i) as string;
		const binary = this.helpers.assertBinaryData(i, property);
		const data = await this.helpers.getBinaryDataBuffer(i, property);
		const form = multipart(
			{
				document_type: this.getNodeParameter('documentType', i) as string,
				name: text(this.getNodeParameter('name', i, '')),
				document_id: text(this.getNodeParameter('documentId', i, '')),
				is_binding: String(this.getNodeParameter('isBinding', i, true)),
				supersedes: text(this.getNodeParameter('supersedes', i, '')),
				effective_date: text(this.getNodeParameter('effectiveDate', i, '')),
				community,
			},
			{
				fieldName: 'file',
				fileName: binary.fileName ?? `document${binary.fileExtension ? `.${binary.fileExtension}` : ''}`,
				mimeType: binary.mimeType || 'application/octet-stream',
				data,
			},
		);
		return await callWorker.call(this, {
			method: 'POST', path: '/webhook/arc-ingest', body: form.body,
			headers: { 'Content-Type': form.contentType }, retries,
		}, i);
	}

	if (operation === 'confirm') {
		const query = text(this.getNodeParameter('confirmQuery', i));
		if (!query) {
			throw new NodeOperationError(this.getNode(), 'Question is empty: give the question whose answer is confirmed', {
				itemIndex: i,
			});
		}
		const body: IDataObject = { query };
		if (this.getNodeParameter('answer', i, 'passage') === 'none') body.answer = 'none';
		else body.chunk_id = this.getNodeParameter('chunkId', i) as number;
		if (community) body.community = community;
		return await callWorker.call(this, { method: 'POST', path: '/webhook/arc-confirm', body, retries }, i);
	}

	if (operation === 'listCommunities') {
		const listed = await callWorker.call(this, { method: 'GET', path: '/webhook/arc-communities', retries }, i);
		return (listed.communities ?? []) as IDataObject[];
	}

	if (operation === 'listDocuments') {
		const listed = await callWorker.call(this, { method: 'GET', path: '/webhook/arc-documents', qs, retries }, i);
		return ((listed.documents ?? []) as IDataObject[]).map((document) => ({
			...document,
			community: listed.community ?? null,
		}));
	}

	if (operation === 'deleteDocument') {
		const documentId = text(this.getNodeParameter('documentId', i));
		if (!documentId) {
			throw new NodeOperationError(this.getNode(), 'Document ID is empty: name the document to delete', {
				itemIndex: i,
			});
		}
		return await callWorker.call(this, {
			method: 'DELETE', path: `/webhook/arc-documents/${encodeURIComponent(documentId)}`, qs, retries,
		}, i);
	}

	throw new NodeOperationError(this.getNode(), `Unknown operation "${operation}"`, { itemIndex: i });
}
