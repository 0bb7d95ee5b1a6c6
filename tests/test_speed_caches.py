"""What the speed work keeps from one prediction to the next changes no result: a calibration
file is read again once it changes, the 1-GPU baseline is the one a fresh simulation gives; and
the fast engine's one clock and the detailed engine's array of clocks run the same program."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ddlsim import api
from ddlsim.calibration.store import calibration_path, shipped_dir
from ddlsim.engine import simulate as engine_simulate
from ddlsim.engine.simulate import SimOptions

pytestmark = pytest.mark.usefixtures("no_user_calibration")


def test_a_calibration_file_is_read_again_once_it_changes():
    root = Path(os.environ["DDLSIM_CALIBRATION_DIR"])
    user = calibration_path(root, "alexnet", "p100-sxm2", 64, "fp32")
    user.parent.mkdir(parents=True)
    shipped = calibration_path(shipped_dir(), "alexnet", "p100-sxm2", 64, "fp32")
    shutil.copy(shipped, user)
    before = api.predict("alexnet", 8).single_gpu_images_per_sec
    doc = json.loads(user.read_text(encoding="utf-8"))
    doc["step_time_s"] *= 2  # the same file, twice as slow
    user.write_text(json.dumps(doc), encoding="utf-8")
    after = api.predict("alexnet", 8).single_gpu_images_per_sec
    assert after == pytest.approx(before / 2, rel=1e-9)


def test_the_one_gpu_baseline_is_what_a_fresh_simulation_gives(monkeypatch):
    kept = api.predict("resnet50", 64, inter_node="25gbe")
    again = api.predict("vgg16", 16)  # other entries in between
    monkeypatch.setattr(engine_simulate, "_ALONE", {})  # nothing kept: simulated afresh
    fresh = api.predict("resnet50", 64, inter_node="25gbe")
    assert kept.single_gpu_images_per_sec == fresh.single_gpu_images_per_sec
    assert kept.to_dict() == fresh.to_dict()
    assert again.single_gpu_images_per_sec != kept.single_gpu_images_per_sec


@pytest.mark.parametrize("comm", ["horovod-nccl", "ps", "byteps"])
def test_the_fast_and_detailed_engines_run_the_same_program(comm):
    """One clock or sixteen, the workers take the same steps (segments and waits) and the
    communication loop the same events, up to Horovod's run-time fusion; only the costing
    differs (closed form against the executor's flows)."""
    setup = api.prepare(api.job("googlenet", 16, comm=comm))
    fast = setup.simulate(SimOptions())
    detailed = setup.simulate(SimOptions(engine="detailed"))
    assert fast.work.worker_steps == detailed.work.worker_steps
    assert fast.work.loop_events == pytest.approx(detailed.work.loop_events, rel=0.05)
    assert detailed.iteration_time_s == pytest.approx(fast.iteration_time_s, rel=0.03)
