import { randomBytes } from 'crypto';

export interface FilePart {
	fieldName: string;
	fileName: string;
	mimeType: string;
	data: Buffer;
}

export interface Multipart {
	body: Buffer;
	contentType: string;
}

/** A header value's quoted string: quotes, backslashes and line breaks cannot end it early. */
function quoted(value: string): string {
	return `"${value.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\r\n]+/g, ' ')}"`;
}

/**
 * A multipart/form-data body, built here so the file's bytes go out exactly as they are, with
 * the text fields the worker's ingest webhook reads beside it. Empty fields are left out.
 */
export function multipart(fields: Record<string, string>, file: FilePart): Multipart {
	const boundary = `----arc-retrieval-${randomBytes(12).toString('hex')}`;
	const parts: Buffer[] = [];
	for (const [name, value] of Object.entries(fields)) {
		if (value === '') continue;
		parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name=${quoted(name)}\r\n\r\n`
			+ `${value}\r\n`, 'utf8'));
	}
	parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name=${quoted(file.fieldName)}; `
		+ `filename=${quoted(file.fileName)}\r\nContent-Type: ${file.mimeType}\r\n\r\n`, 'utf8'));
	parts.push(file.data);
	parts.push(Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8'));
	return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}
