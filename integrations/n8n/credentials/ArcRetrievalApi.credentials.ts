import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/**
 * Where the arc-retrieval worker listens and the token it asks for in X-ARC-Token. The worker
 * has two: its API token (ARC_API_TOKEN) opens questions, its ingest token (ARC_INGEST_TOKEN)
 * opens ingesting, listing and deleting documents. One credential holds one of them, so an AI
 * Agent given a question credential cannot change the knowledge base.
 */
export class ArcRetrievalApi implements ICredentialType {
	name = 'arcRetrievalApi';

	displayName = 'ARC Retrieval API';

	icon: Icon = { light: 'file:../icons/arc.svg', dark: 'file:../icons/arc.dark.svg' };

	documentationUrl = 'https://github.com/arc-retrieval/arc-retrieval#the-n8n-node';

	properties: INodeProperties[] = [
		{
			displayName: 'Base URL',
			name: 'baseUrl',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			placeholder: 'http://arc-worker:8080',
			description: 'Where the worker listens, without a path',
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description:
				'Sent in the X-ARC-Token header: the worker\'s ARC_API_TOKEN for questions, or its ARC_INGEST_TOKEN for ingesting, listing and deleting documents',
		},
		{
			displayName: 'Token Is For',
			name: 'access',
			type: 'options',
			options: [
				{
					name: 'Questions (ARC_API_TOKEN)',
					value: 'questions',
					description: 'The Ask operation',
				},
				{
					name: 'Documents (ARC_INGEST_TOKEN)',
					value: 'documents',
					description: 'The Ingest, List Documents and Delete Document operations',
				},
			],
			default: 'questions',
			description: 'Which door of the worker the test checks the token at',
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				'X-ARC-Token': '={{$credentials.token}}',
			},
		},
	};

	// A cheap request behind the token's own door that reads and writes nothing: the document
	// list for an ingest token; for an API token, a GET on the question webhook, which the worker
	// authenticates before refusing the method (405). A refused token is 401 "unauthorized".
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.baseUrl.replace(/\\/+$/, "")}}',
			url: '={{$credentials.access === "documents" ? "/webhook/arc-documents" : "/webhook/arc-retrieval"}}',
			method: 'GET',
			ignoreHttpStatusErrors: true,
			json: true,
		},
		rules: [
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'error',
					value: 'unauthorized',
					message:
						'The worker refused this token (401): check the token, and that "Token Is For" names the door it opens',
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'error',
					value: 'rate_limited',
					message: 'The worker refused too many attempts from here (429); wait a minute and test again',
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'error',
					value: 'forbidden',
					message: 'This worker has no ARC_INGEST_TOKEN: set it to ingest, list and delete documents',
				},
			},
		],
	};
}
