"""The http kind with benchd's vectors: {embedding} and {q_embedding} against Chroma's v2 API."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from kinds import config_text, once_json
from store_servers import Chroma

from benchd.config.load import load_config
from benchd.errors import ConfigError

pytestmark = pytest.mark.timeout(600)


def http_chroma(url: str, collection_id: str, cache: Path, model: str = "hash:256") -> str:
    base = f"/api/v2/tenants/default_tenant/databases/default_database/collections/{collection_id}"
    return f"""
[[probe]]
name = "http-chroma"
fixture = "packaged:smoke"
k = [5, 10]

[probe.target]
kind = "http"
url = "{url}"
namespace = "benchd-http"
auth_prefix = ""

[probe.target.embed]
model = "{model}"
cache_dir = "{cache}"

[probe.target.search]
method = "POST"
path = "{base}/query"
ids = "ids[0]"
[probe.target.search.body]
query_embeddings = ["{{q_embedding}}"]
n_results = "{{k}}"
where = {{ ns = "{{namespace}}" }}
include = []

[probe.target.seed]
method = "POST"
path = "{base}/upsert"
batch_size = 100
[probe.target.seed.record]
id = "{{id}}"
text = "{{content}}"
vector = "{{embedding}}"
meta = {{ ns = "{{namespace}}" }}
[probe.target.seed.body]
ids = "{{records[*].id}}"
documents = "{{records[*].text}}"
embeddings = "{{records[*].vector}}"
metadatas = "{{records[*].meta}}"
"""


def test_http_kind_sends_benchds_vectors_and_ranks_as_the_chroma_kind(
    chroma: Chroma, tmp_path: Path
) -> None:
    base = f"{chroma.url}/api/v2/tenants/default_tenant/databases/default_database/collections"
    made = httpx.post(base, json={"name": "http-embed", "metadata": {"hnsw:space": "cosine"}})
    made.raise_for_status()
    config = tmp_path / "http.toml"
    config.write_text(http_chroma(chroma.url, made.json()["id"], tmp_path))
    probe = once_json(config, chroma)
    assert probe["outcome"] == "success", probe["error"]
    assert probe["model"] == "hash:256"  # the embedder's label is the model label
    kind = tmp_path / "kind.toml"
    kind.write_text(config_text("chroma", chroma, "benchd-kind", cache_dir=tmp_path))
    recall = once_json(kind, chroma)["aggregate"]["recall@10"]
    assert abs(recall - probe["aggregate"]["recall@10"]) <= 0.02


def test_model_and_an_embed_model_together_are_a_config_error(tmp_path: Path) -> None:
    text = http_chroma("http://127.0.0.1:8000", "x", tmp_path).replace(
        'auth_prefix = ""', 'auth_prefix = ""\nmodel = "my-model"'
    )
    path = tmp_path / "both.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"set model or \[probe.target.embed\], not both"):
        load_config(path)


