"""A document's way in: readers (Markdown, text, HTML, DOCX, PDF with OCR for scans, BEIR) ->
chunking -> the ingestor, which embeds the chunks and stores them atomically; manifests and
amendments say what a document is and which sections it replaces."""
