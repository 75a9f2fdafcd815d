"""Serving trained models over HTTP: a JSON translation API that batches concurrent requests.

The modules, in the order a request meets them:

    protocol.py        the HTTP/1.1 connection: slow heads closed, bad framing answered 400
    access.py          who may use the server: Host, Origin, API keys, rate limits, headers
    limits.py          what one request and the queue may hold (`Limits`)
    registry.py        the loaded models (`ServedModel`): translator, languages, model card
    schemas.py         the JSON bodies of /v1/translate and /v1/models (pydantic)
    http_errors.py     every error as a status and a one-line JSON body; the body-size limit
    worker.py          the decoding worker: a thread that merges queued requests into batches
    prometheus.py      the Prometheus metrics of one app
    state.py           what the routes share (`ServerState`), and the path from lines to answers
    libretranslate.py  LibreTranslate's API (`POST /translate`, `GET /languages`)
    explorer.py        the attention explorer: its page (static/) and `POST /v1/explain`
    alignment.py       word alignment: `POST /v1/align`
    chapters.py        the explorer's chapter pages: their widgets' `POST /v1/chapters/...`
    run_history.py     a training run's attention by step, for the explorer's training page
    app.py             `create_app(models, limits)`: the FastAPI application

The command line (`seq2seq serve`: load the models, run uvicorn) is seq2seq/commands/serve.py.
The event loop only parses, queues and answers; the model runs in the worker's thread.
"""
