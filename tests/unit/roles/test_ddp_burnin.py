"""ddp_burnin.py's pure parts: the TFLOPS formula, options, the CPU model name (no torch needed)."""
from __future__ import annotations

import pytest

from role_files import load

ddp_burnin = load("pytorch_env", "ddp_burnin.py")


def test_tflops_is_two_n_cubed_per_product():
    # 100 products of 8192^3 GEMMs in 4.4 s: 2 x 8192^3 x 100 / 4.4 / 1e12 = 24.99 TFLOPS.
    assert ddp_burnin.tflops(8192, 100, 4.4) == pytest.approx(2 * 8192 ** 3 * 100 / 4.4 / 1e12)
    assert ddp_burnin.tflops(1024, 5, 0) == 0.0


def test_options_and_refusals(capsys):
    args = ddp_burnin.parse_args([])
    assert (args.seconds, args.size, args.dtype, args.device) == (300.0, 0, "auto", "auto")
    for bad, says in ((["--seconds", "0"], "--seconds must be greater than 0"),
                      (["--size", "-1"], "--size must be 0"), (["--dtype", "fp8"], "invalid choice: 'fp8'")):
        with pytest.raises(SystemExit) as exc:
            ddp_burnin.parse_args(bad)
        assert exc.value.code == 2
        assert says in capsys.readouterr().err


def test_cpu_model_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\n")
    assert ddp_burnin.cpu_model(str(info)) == "Intel(R) Xeon(R) Processor"
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")  # arm64 kernels print no model name
    assert ddp_burnin.cpu_model(str(info)) == "cpu"
    assert ddp_burnin.cpu_model(str(tmp_path / "missing")) == "cpu"
