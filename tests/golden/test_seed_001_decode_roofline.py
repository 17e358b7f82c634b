"""seeds/001 'Why decode is memory-bound': the whole decode_roofline.py output and its prose.

The seed's assumptions: Llama-3-8B in BF16 on an H100 SXM at 989 TFLOP/s and 3.35 TB/s,
gemm and attention summed (overlap "parts"), kernels at peak (mfu = mbu = 1), no
activation traffic, no KV write, the LM head counted, the embedding not read. Its
"over budget" column is a 52 GB KV budget: 80 GB less 16.06 GB of weights less a
12 GB reserve (51.94 GB), which also gives its "about 48 sequences" at 8k.
"""

from __future__ import annotations

import pytest

from tests.conftest import sweep_json

SEED = ("--gpu", "h100-sxm", "--model", "llama-3-8b", "--peak-tflops", "989",
        "--profile", "ideal", "--no-kv-write", "--memory-reserve-gb", "12")

TABLES = {
    1024: """\
     1     4.52      221       221       1     1.0    0.3      0
     8     4.80     1666       208       7     7.7    2.6      1
    32     5.76     5553       174      22    25.8    8.7      4
    64     7.04     9085       142      36    42.2   14.3      9
   128     9.61    13321       104      53    61.8   20.9     17
   256    14.74    17371        68      70    80.6   27.3     34""",
    8192: """\
     1     4.80      208       208       7     1.2    0.4      1
     8     7.04     1136       142      36     6.5    2.2      9
    32    14.74     2171        68      70    12.5    4.2     34
    64    24.99     2561        40      82    14.8    5.0     69  over budget
   128    45.51     2813        22      90    16.2    5.5    137  over budget
   256    86.53     2958        12      95    17.0    5.8    275  over budget""",
}


def point(batch: int, context: int, *extra: str) -> dict:
    return sweep_json("point", *SEED, "--batch", batch, "--context", context, *extra)


def seed_row(r: dict) -> str:
    """The seed's own print format, filled from `sweep point --json`."""
    kv_gb = r["parts"]["attention"]["bytes"] / 1e9
    return (f"{r['batch']:>6}{r['step_time_s'] * 1e3:>9.2f}{r['tokens_per_s']:>9.0f}"
            f"{r['per_user_tokens_per_s']:>10.0f}{100 * r['attention_share']:>8.0f}"
            f"{r['intensity']:>8.1f}{100 * r['mfu']:>7.1f}{kv_gb:>7.0f}"
            + ("" if r["fits"] else "  over budget"))


@pytest.mark.parametrize("context", [1024, 8192])
def test_decode_step_table(context):
    rows = [seed_row(point(b, context)) for b in (1, 8, 32, 64, 128, 256)]
    assert "\n".join(rows) == TABLES[context]


def test_mlp_projection_intensity_table():
    rows = sweep_json("gemm", "--k", 4096, "--n", 14336, "--ridge", 295)
    printed = [f"B={r['rows']:>4}: {r['intensity']:7.1f} FLOP/byte -> {r['bound']}-bound"
               for r in rows]
    assert printed == [
        "B=   1:     1.0 FLOP/byte -> memory-bound",
        "B=   8:     8.0 FLOP/byte -> memory-bound",
        "B=  64:    62.7 FLOP/byte -> memory-bound",
        "B= 256:   237.0 FLOP/byte -> memory-bound",
        "B=1024:   774.9 FLOP/byte -> compute-bound",
    ]


def test_ridge_and_attention_intensity():
    r = point(1, 1024)
    assert f"{r['ridge']:.0f}" == "295"
    # 4 FLOPs per byte for Llama-3-8B's attention, at any batch (group size 4)
    for batch, context in [(1, 1024), (256, 8192)]:
        assert point(batch, context)["parts"]["attention"]["intensity"] == pytest.approx(4.0)
    # "At batch 1 that is about 3.35 TFLOP/s of a 989 TFLOP/s GPU": the matmuls at
    # intensity 1 attain intensity x bandwidth
    attainable = r["parts"]["gemm"]["intensity"] * r["bandwidth_bytes_per_s"]
    assert f"{attainable / 1e12:.2f}" == "3.35"


def test_prose_numbers():
    one, big = point(1, 1024), point(128, 1024)
    # "at batch 128 the step produces 60 times as many tokens for about twice the time"
    assert f"{big['tokens_per_s'] / one['tokens_per_s']:.0f}" == "60"
    assert f"{big['step_time_s'] / one['step_time_s']:.0f}" == "2"
    # "the first term is flat at 4.5 ms"; "Weights 15 GB, shared"
    assert f"{one['parts']['gemm']['time_s'] * 1e3:.1f}" == "4.5"
    assert f"{one['parts']['gemm']['bytes'] / 1e9:.0f}" == "15"
    # "about 25,000 at 1k context and 3,100 at 8k"
    assert f"{one['throughput_ceiling_tokens_per_s']:.2g}" == "2.5e+04"
    assert f"{point(1, 8192)['throughput_ceiling_tokens_per_s']:.2g}" == "3.1e+03"
    # "batch 128 gives 13,300 tokens per second in total and 104 per user;
    #  batch 256 gives 17,400 in total but 68 per user"
    assert (f"{big['tokens_per_s']:.3g}", f"{big['per_user_tokens_per_s']:.0f}") == (
        "1.33e+04", "104")
    huge = point(256, 1024)
    assert (f"{huge['tokens_per_s']:.3g}", f"{huge['per_user_tokens_per_s']:.0f}") == (
        "1.74e+04", "68")


def test_capacity_at_8k():
    # "about 48 sequences do, so the real ceiling there is between 2,200 and 2,600"
    r = point(48, 8192)
    assert r["max_batch"] == 48 and r["fits"]
    assert 2200 < r["tokens_per_s"] < 2600


def test_mlp_crosses_ridge_near_batch_300():
    rows = sweep_json("gemm", "--k", 4096, "--n", 14336, "--ridge", 295,
                      *[arg for b in range(250, 400) for arg in ("--rows", b)])
    first = next(r["rows"] for r in rows if r["bound"] == "compute")
    assert f"{first:.1g}" == "3e+02"
