"""Physical GPU -> HIP ordinal under ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES."""

from proton_roctracer.visible_devices import hip_ordinals


def test_nothing_set_is_identity():
    assert hip_ordinals(4, {}) == {0: 0, 1: 1, 2: 2, 3: 3}


def test_rocr_then_hip():
    env = {"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "2,0"}
    assert hip_ordinals(4, env) == {3: 0, 1: 1}


def test_cuda_visible_devices_when_hip_is_unset():
    assert hip_ordinals(4, {"CUDA_VISIBLE_DEVICES": "3,1"}) == {3: 0, 1: 1}
    assert hip_ordinals(4, {"CUDA_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "2"}) == {2: 0}


def test_a_bad_entry_ends_the_list():
    assert hip_ordinals(4, {"HIP_VISIBLE_DEVICES": "1,9,2"}) == {1: 0}
    assert hip_ordinals(4, {"HIP_VISIBLE_DEVICES": "0,0,1"}) == {0: 0}
    assert hip_ordinals(4, {"HIP_VISIBLE_DEVICES": ""}) == {}
