"""Shared fixtures: the bundled demo model as the package finds it."""
import os

import pytest

import qloom


@pytest.fixture(scope="session")
def demo_model():
    path = qloom.demo_model()
    assert path, "qloom.demo_model() found no bundled demo model (qloom/share/qloom/models)"
    assert os.path.isfile(os.path.join(path, "config.json")), path
    expected = os.environ.get("QLOOM_TEST_DEMO_MODEL")
    if expected:
        assert os.path.realpath(path) == os.path.realpath(expected)
    return path


@pytest.fixture(scope="session")
def quantized_demo(tmp_path_factory, demo_model):
    """The demo model quantized once (int4_wo_64, RTN) for the read-only tests."""
    out = tmp_path_factory.mktemp("q") / "int4"
    summary = qloom.quantize(model_dir=demo_model, output_dir=out, quant_scheme="int4_wo_64",
                             exclude_unsupported=True, threads=1)
    return out, summary
