"""A property keeps the value set last, whether it came as a number or as a 0-d tensor (read at finalize)."""

import torch

import proton_core as proton
from proton_core.testing import child, load_profile


def test_a_number_set_after_a_tensor_wins(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s", {"lr (pty)": torch.tensor(0.5)}):
        pass
    with proton.scope("s", {"lr (pty)": 0.25}):
        pass
    proton.finalize()
    assert child(load_profile(tmp_path / "p.hatchet")[0], "s")["metrics"]["lr (pty)"] == 0.25


def test_a_tensor_set_after_a_number_wins(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s", {"lr (pty)": 0.25}):
        pass
    with proton.scope("s", {"lr (pty)": torch.tensor(0.5)}):
        pass
    proton.finalize()
    assert child(load_profile(tmp_path / "p.hatchet")[0], "s")["metrics"]["lr (pty)"] == 0.5
