"""Where node agents fetch the signed config from: a file, HTTP, or the object store that the
publish DAG writes it to ([export] publish_url = s3://...)."""

from __future__ import annotations

import pytest

from joulehouse.collectors.agent_loop import ConfigFetchError, fetch_config
from s3_server import local_s3


@pytest.mark.integration
@pytest.mark.slow
def test_an_agent_fetches_the_config_from_an_object_store_and_a_missing_one_is_revoked():
    with local_s3("fleet-config"):
        import s3fs

        url = "s3://fleet-config/config/recommended-config.json"
        s3fs.S3FileSystem().pipe_file(url, b'{"schema_version": 1}')
        assert fetch_config(url) == b'{"schema_version": 1}'
        assert fetch_config("s3://fleet-config/config/none.json") is None  # no config: revoked
    with pytest.raises(ConfigFetchError, match="cannot fetch config URL s3://fleet-config"):
        fetch_config(url)  # the store is gone: an error, never taken for a revocation


def test_a_file_location_and_a_missing_file(tmp_path):
    path = tmp_path / "recommended-config.json"
    path.write_bytes(b"{}")
    assert fetch_config(str(path)) == b"{}" and fetch_config(str(tmp_path / "none.json")) is None
