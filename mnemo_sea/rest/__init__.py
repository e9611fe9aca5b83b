"""The REST API (`mnemo-sea serve`): FastAPI over the facade, API keys as bearer tokens.

app            the application factory (`create_app`)
auth           the API key -> principal dependency
models         request and response bodies (OpenAPI at /openapi.json)
problems       errors as RFC 9457 problem+json, statuses from the one outcome table
limits         request-size and rate limits
observability  request ids, structured logs, Prometheus metrics
routes         one module per resource
"""
