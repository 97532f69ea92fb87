"""HTTP: the Flask app factory, its blueprints (webhooks, documents, operations), what guards them
(tokens, rate limits, admission control) and the gunicorn configuration."""
