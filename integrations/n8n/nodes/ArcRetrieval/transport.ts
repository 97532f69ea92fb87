import {
	NodeApiError,
	sleep,
	type IDataObject,
	type IExecuteFunctions,
	type IHttpRequestMethods,
	type IHttpRequestOptions,
	type JsonObject,
} from 'n8n-workflow';

export const CREDENTIAL = 'arcRetrievalApi';

/** Retry-After is honoured up to this many seconds a wait; a longer one is reported as an error. */
const LONGEST_WAIT_SECONDS = 30;

interface WorkerResponse {
	body: unknown;
	headers: IDataObject;
	statusCode: number;
}

export interface WorkerCall {
	method: IHttpRequestMethods;
	path: string;
	qs?: IDataObject;
	body?: IDataObject | Buffer;
	headers?: IDataObject;
	/** How many times a 429 or 503 with Retry-After is waited out and sent again. */
	retries: number;
}

/**
 * One call to the worker with the credential's token. A 429 or 503 carrying Retry-After (the
 * rate limit, a full provider pool, another load holding the knowledge base) is waited out and
 * sent again, `retries` times; every other refusal, and the last one, is a NodeApiError that
 * says what the worker said and what to do about it.
 */
export async function callWorker(this: IExecuteFunctions, call: WorkerCall, itemIndex: number): Promise<IDataObject> {
	const credentials = await this.getCredentials(CREDENTIAL, itemIndex);
	const baseURL = String(credentials.baseUrl ?? '').replace(/\/+$/, '');
	const options: IHttpRequestOptions = {
		method: call.method,
		baseURL,
		url: call.path,
		qs: call.qs,
		body: call.body,
		headers: { Accept: 'application/json', ...(call.headers ?? {}) },
		json: !Buffer.isBuffer(call.body),
		returnFullResponse: true,
		ignoreHttpStatusErrors: true,
	};
	for (let attempt = 0; ; attempt++) {
		let response: WorkerResponse;
		try {
			response = (await this.helpers.httpRequestWithAuthentication.call(
				this,
				CREDENTIAL,
				options,
			)) as WorkerResponse;
		} catch (error) {
			throw new NodeApiError(this.getNode(), error as JsonObject, {
				message: `The ARC Retrieval worker at ${baseURL} could not be reached`,
				description: `${(error as Error).message}. Check the credential's Base URL and that the worker is running.`,
				itemIndex,
			});
		}
		const body = parsed(response.body);
		if (response.statusCode >= 200 && response.statusCode < 300) {
			return body;
		}
		const wait = retryAfter(response.headers);
		if ((response.statusCode === 429 || response.statusCode === 503) && wait !== undefined
			&& wait <= LONGEST_WAIT_SECONDS && attempt < call.retries) {
			await sleep(wait * 1000);
			continue;
		}
		throw workerError.call(this, response.statusCode, body, wait, itemIndex);
	}
}

function parsed(body: unknown): IDataObject {
	if (typeof body === 'string') {
		try {
			return JSON.parse(body) as IDataObject;
		} catch {
			return { message: body.slice(0, 300) };
		}
	}
	if (Buffer.isBuffer(body)) {
		return parsed(body.toString('utf8'));
	}
	return (body ?? {}) as IDataObject;
}

function retryAfter(headers: IDataObject): number | undefined {
	const value = Number(headers?.['retry-after']);
	return Number.isFinite(value) && value >= 0 ? Math.max(1, Math.ceil(value)) : undefined;
}

/** What each refusal means for the person running the workflow. */
function advice(statusCode: number, code: string, wait: number | undefined): string {
	switch (statusCode) {
		case 401:
			return 'Check the ARC Retrieval API credential: Ask needs the worker\'s API token (ARC_API_TOKEN); '
				+ 'Ingest, List Documents and Delete Document its ingest token (ARC_INGEST_TOKEN).';
		case 403:
			return code === 'forbidden'
				? 'The worker has no ARC_INGEST_TOKEN; set it to ingest, list and delete documents.'
				: 'The token is limited to other communities.';
		case 404:
			return 'Nothing by that name: check the community or the document ID.';
		case 413:
			return 'The file is larger than the worker accepts (ARC_MAX_UPLOAD_BYTES).';
		case 422:
			return 'Correct the field named above and run the node again.';
		case 429:
		case 503:
			return wait === undefined
				? 'The worker is busy; run the node again shortly.'
				: `The worker is busy; it asked to wait ${wait} s (raise "Retries When Busy" to wait it out).`;
		default:
			return 'See the worker\'s log for this request ID.';
	}
}

function workerError(
	this: IExecuteFunctions,
	statusCode: number,
	body: IDataObject,
	wait: number | undefined,
	itemIndex: number,
): NodeApiError {
	const code = String(body.error ?? 'http_error');
	const field = body.field ? ` (field: ${String(body.field)})` : '';
	const said = String(body.message ?? `HTTP ${statusCode}`);
	const requestId = body.request_id ? ` Request ID: ${String(body.request_id)}.` : '';
	return new NodeApiError(this.getNode(), body as JsonObject, {
		message: `ARC Retrieval worker: ${statusCode} ${code}${field}: ${said}`,
		description: `${advice(statusCode, code, wait)}${requestId}`,
		httpCode: String(statusCode),
		itemIndex,
	});
}
