"""Length distributions: parsing, laws, sampling, trace files, one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.errors import SpecError
from rooftui.core.lengths import (
    Capped,
    Empirical,
    Exponential,
    Fixed,
    Lognormal,
    Mixture,
    QuantileTable,
    parse_distribution,
    read_trace,
)


def test_each_form_parses_to_its_law():
    assert isinstance(parse_distribution("fixed:128"), Fixed)
    assert isinstance(parse_distribution("exp:mean=100"), Exponential)
    capped = parse_distribution("exp:mean=100,cap=300")
    assert isinstance(capped, Capped) and capped.upper == 300
    assert isinstance(parse_distribution("lognormal:median=50,sigma=0.8"), Lognormal)
    assert isinstance(parse_distribution("lognormal:median=50,sigma=0.8,cap=400"), Capped)
    mixture = parse_distribution("bimodal:p=0.3,a=80,b=450")
    assert isinstance(mixture, Mixture) and mixture.p == 0.3


def test_means_are_exact():
    assert parse_distribution("fixed:7").mean() == 7
    assert parse_distribution("exp:mean=100").mean() == 100
    assert parse_distribution("exp:mean=100,cap=300").mean() == pytest.approx(
        100 * (1 - math.exp(-3)), rel=1e-10)
    assert parse_distribution("lognormal:median=100,sigma=0.5").mean() == pytest.approx(
        100 * math.exp(0.125), rel=1e-12)
    assert parse_distribution("bimodal:p=0.25,a=100,b=500").mean() == pytest.approx(400)


def test_bimodal_takes_nested_shapes():
    mixture = parse_distribution("bimodal:p=0.5,a=(fixed:96),b=(lognormal:median=400,sigma=0.3)")
    assert isinstance(mixture.a, Fixed) and isinstance(mixture.b, Lognormal)
    draws = mixture.sample(np.random.default_rng(0), 10_000)
    assert 0.47 < np.mean(draws == 96) < 0.53


@pytest.mark.parametrize("spec", [
    "fixed:100", "exp:mean=50", "exp:mean=50,cap=120", "lognormal:median=80,sigma=1.2",
    "bimodal:p=0.6,a=60,b=600,cap=1000",
])
def test_samples_are_whole_tokens_with_the_right_mean(spec):
    law = parse_distribution(spec)
    draws = law.sample(np.random.default_rng(1), 200_000)
    assert draws.dtype == np.int64 and draws.min() >= 1 and draws.max() <= law.upper
    # rounding to the nearest token moves the mean by far less than 5 standard errors
    assert abs(draws.mean() - law.mean()) < 5 * draws.std() / math.sqrt(draws.size) + 0.01


def test_sampling_is_reproducible():
    law = parse_distribution("bimodal:p=0.6,a=60,b=600")
    first = law.sample(np.random.default_rng(42), 1000)
    again = law.sample(np.random.default_rng(42), 1000)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, law.sample(np.random.default_rng(43), 1000))


@settings(max_examples=50, deadline=None)
@given(q=st.floats(0.001, 0.999))
def test_quantile_inverts_the_cdf(q):
    for spec in ("exp:mean=70", "lognormal:median=200,sigma=0.9", "bimodal:p=0.4,a=30,b=300"):
        law = parse_distribution(spec)
        assert law.cdf(law.quantile(q)) == pytest.approx(q, abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.integers(1, 50), min_size=1, max_size=40), q=st.floats(0.0, 1.0))
def test_empirical_quantile_is_the_inverse_cdf(values, q):
    law = Empirical.of(np.array(values))
    x = float(law.quantile(q))
    assert law.cdf(x) >= q - 1e-12
    assert x in values


def test_quantile_table_handles_atoms():
    # 40 % of the mass at exactly 8 tokens, then linear up to 100
    table = QuantileTable.of([0, 0.1, 0.5, 1.0], [2, 8, 8, 100], "test")
    assert table.cdf(7.999) == pytest.approx(0.1 * 5.999 / 6)
    assert table.cdf(8) == pytest.approx(0.5)
    assert table.cdf(54) == pytest.approx(0.75)
    assert table.cdf(100) == 1.0 and table.cdf(1) == 0.0
    draws = table.sample(np.random.default_rng(0), 100_000)
    assert 0.38 < np.mean(draws == 8) < 0.44
    assert draws.min() >= 2 and draws.max() <= 100


def test_quantile_table_rejects_bad_tables():
    with pytest.raises(SpecError, match="rise strictly"):
        QuantileTable.of([0, 0.5, 0.5, 1], [1, 2, 3, 4], "t")
    with pytest.raises(SpecError, match="non-decreasing"):
        QuantileTable.of([0, 0.5, 1], [1, 3, 2], "t")
    with pytest.raises(SpecError, match="same"):
        QuantileTable.of([0, 1], [1, 2, 3], "t")


@pytest.mark.parametrize("spec, message", [
    ("gauss:mean=3", "expected one of"),
    ("fixed:0", "must be in"),
    ("fixed:2.5", "whole number"),
    ("fixed:abc", "must be a number"),
    ("exp:mean=-1", "must be in"),
    ("exp:mean=100,cap=0", "cap"),
    ("exp:mu=100", "unknown parameter"),
    ("exp:100", "expected key=value"),
    ("lognormal:median=100", "missing sigma"),
    ("bimodal:p=1.5,a=1,b=2", "p must be in"),
    ("bimodal:p=0.5,a=(exp:mean=1,b=2", "unbalanced"),
    ("bimodal:p=0.5,a=(nope:1),b=2", "expected one of"),
    ("empirical:", "expected empirical:PATH"),
    ("empirical:/no/such/trace.csv", "not found"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(SpecError, match=message) as error:
        parse_distribution(spec)
    assert "\n" not in str(error.value)


def test_empirical_reads_the_column_asked_for(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0,10,3\n1.5,20,5\n2,30,4\n")
    assert np.array_equal(parse_distribution(f"empirical:{path}").values, [3, 4, 5])
    assert parse_distribution(f"empirical:{path}", "input_tokens").mean() == 20


@pytest.mark.parametrize("text, message", [
    ("input_tokens,output_tokens\n10,3\n20,x\n", "row 3, column 'output_tokens'"),
    ("input_tokens,output_tokens\n10,3\n20,0\n", "whole numbers from 1 to 100,000,000; row 2"),
    ("input_tokens,output_tokens\n10,3\n20,2.5\n", "whole numbers from 1 to"),
    ("input_tokens,output_tokens\n", "no rows"),
    ("a,b\n1,2\n", "no input_tokens or output_tokens column"),
    ("", "empty file"),
    ("arrival_s,input_tokens,output_tokens\n2,10,3\n1,20,4\n", "must not decrease"),
])
def test_malformed_traces_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(SpecError, match=message) as error:
        read_trace(path)
    assert "\n" not in str(error.value)


def test_parquet_needs_a_reader_from_the_caller(tmp_path):
    path = tmp_path / "trace.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(SpecError, match="parquet traces are read by the `sweep` commands"):
        parse_distribution(f"empirical:{path}")


def test_real_trace_reads(shared_dir):
    law = parse_distribution(f"empirical:{shared_dir / 'traces' / 'sharegpt-8k.csv'}")
    assert law.values.size == 30_731 and law.upper == 1024
