"""GAM control (``fit="gam"``) against mgcv (through rpy2) and pygam.

The model is mgcv's ``gam(y ~ s(z, k = 10, bs = "cr"), method = "GCV.Cp")`` (or ``method = "REML"``).
The data sets are the Pythia lm-eval trajectories of ``../shared/data/pythia-lm-eval-v0.3`` (control: the
in-domain ``lambada_openai`` accuracy; response: every other task's accuracy, one data set per model and
task) and seeded simulations, more than 100 in all.

What is compared, and why in this way:

- **At mgcv's smoothing parameter** gengen must reproduce mgcv's fitted values, EDF and criterion value
  (``gcv.ubre``). This checks the basis, the penalty, the fit and the criterion, independently of the search.
- **At gengen's own optimum** the criterion must never be worse than at mgcv's: gengen searches ``log λ``
  globally (grid + Brent), mgcv's Newton iteration (``magic``, ``gam.outer``) stops at the first local optimum
  it reaches. On short trajectories with tied control values (Pythia's early checkpoints all score 0 on
  lambada) GCV often has two minima and mgcv sometimes stops at the worse one; there the fits legitimately
  differ. Wherever the two optima coincide (the criterion values agree), the fitted values must correlate
  ≥ 0.9999 with mgcv's, differ by at most 1e-3 × sd(y) and the EDF by at most 0.1; at least 100 data sets
  must be such matches.

mgcv runs with tight convergence tolerances (``mgcv.tol`` and Newton's ``conv.tol`` 1e-9): with the defaults
its iteration stops while a flat GCV curve still moves the fit by up to ~2e-3 × sd(y) (seen on Pythia tasks),
whereas gengen's Brent search locates the optimum to 1e-7 in log λ.

pygam is given mgcv's own model matrix and penalty (from ``smoothCon``), so that its solver and its GCV score
(with γ = 1) are compared with gengen's on exactly the same problem.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from gengen import stats

if not hasattr(stats, "gam_fit"):
    pytest.skip("gengen.stats.gam_fit is not available in this build", allow_module_level=True)

PYTHIA = Path("data") / "pythia-lm-eval-v0.3"
ID_TASK = "lambada_openai"


@dataclass(frozen=True)
class DataSet:
    name: str
    control: np.ndarray  # (n, q)
    y: np.ndarray  # (n,)
    k: int


# ----------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------


def pythia_sets(shared_dir: Path) -> list[DataSet]:
    """One data set per model and task: ID = lambada_openai acc, response = the task's acc, by step."""
    sets = []
    for model_dir in sorted((shared_dir / PYTHIA).iterdir()):
        checkpoints = []
        for path in model_dir.glob("*.json"):
            match = re.search(r"step(\d+)", path.name)
            assert match is not None, path
            checkpoints.append((int(match.group(1)), json.loads(path.read_text())["results"]))
        checkpoints.sort(key=lambda item: item[0])
        results = [result for _, result in checkpoints]
        control = np.array([result[ID_TASK]["acc"] for result in results])
        tasks = set.intersection(*({task for task, value in result.items() if "acc" in value} for result in results))
        for task in sorted(tasks - {ID_TASK}):
            y = np.array([result[task]["acc"] for result in results])
            if np.ptp(y) > 0:
                sets.append(DataSet(f"{model_dir.name}:{task}", control[:, None], y, 10))
    return sets


def simulated_sets(count: int, seed: int) -> list[DataSet]:
    """Smooth truths of several shapes, sizes, noise levels, with and without tied control values."""
    rng = np.random.default_rng(seed)
    truths = [
        lambda z: np.sin(2 * np.pi * z),
        lambda z: 1 - np.exp(-4 * z),
        lambda z: z,
        lambda z: (z - 0.5) ** 2,
        lambda z: 1 / (1 + np.exp(-20 * (z - 0.4))),
        lambda z: np.sin(6 * z) * z,
    ]
    sets = []
    for i in range(count):
        n = (30, 60, 100, 200)[i % 4]
        z = rng.uniform(0, 1, n) if i % 3 else np.round(rng.beta(2, 5, n), 2)
        y = truths[i % len(truths)](z) + rng.normal(0, (0.05, 0.2, 1.0)[i % 3], n)
        sets.append(DataSet(f"simulated {i}", z[:, None], y, (10, 10, 5, 20)[i % 4]))
    return sets


def additive_sets(count: int, seed: int) -> list[DataSet]:
    """Two correlated controls, y = s1(z1) + s2(z2) + noise."""
    rng = np.random.default_rng(seed)
    sets = []
    for i in range(count):
        n = (60, 120)[i % 2]
        z1 = rng.uniform(0, 1, n)
        z2 = 0.5 * z1 + rng.uniform(0, 1, n)
        y = np.sin(3 * z1) + (z2 - 0.7) ** 2 + rng.normal(0, 0.1 + 0.2 * (i % 3), n)
        sets.append(DataSet(f"additive {i}", np.column_stack([z1, z2]), y, (6, 10)[i % 2]))
    return sets


# ----------------------------------------------------------------------------------------------------------
# R
# ----------------------------------------------------------------------------------------------------------

MGCV_FIT = """
function(z, y, k, method, bs) {
  data <- data.frame(z, y = y)
  names(data) <- c(paste0("z", seq_len(ncol(z))), "y")
  terms <- paste0("s(z", seq_len(ncol(z)), ", k = ", k, ", bs = '", bs, "')", collapse = " + ")
  control <- mgcv::gam.control(mgcv.tol = 1e-9, newton = list(conv.tol = 1e-9))
  formula <- as.formula(paste("y ~", terms))
  b <- suppressWarnings(mgcv::gam(formula, data = data, method = method, control = control))
  list(score = b$gcv.ubre, edf = sum(b$edf), sp = as.numeric(b$sp), fitted = as.numeric(fitted(b)))
}
"""

SMOOTH_CON = """
function(z, k) {
  sm <- mgcv::smoothCon(mgcv::s(z, k = k, bs = "cr"), data = data.frame(z = z), absorb.cons = TRUE)[[1]]
  list(X = sm$X, S = sm$S[[1]])
}
"""


class Mgcv:
    """mgcv through rpy2, converting inside a local converter context."""

    def __init__(self) -> None:
        import rpy2.robjects as ro
        from rpy2.robjects import numpy2ri

        self._converter = ro.default_converter + numpy2ri.converter
        self._fit = ro.r(MGCV_FIT)
        self._smooth_con = ro.r(SMOOTH_CON)
        self.version = str(ro.r('as.character(packageVersion("mgcv"))')[0])

    def fit(self, data: DataSet, k: int, method: str, bs: str = "cr") -> dict[str, Any]:
        with self._converter.context():
            out = self._fit(np.asarray(data.control, dtype=float), data.y, k, method, bs)
            return {
                "score": float(np.asarray(out["score"]).ravel()[0]),
                "edf": float(np.asarray(out["edf"]).ravel()[0]),
                "sp": np.asarray(out["sp"], dtype=float).ravel(),
                "fitted": np.asarray(out["fitted"], dtype=float).ravel(),
            }

    def smooth_con(self, z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        with self._converter.context():
            out = self._smooth_con(z, k)
            return np.asarray(out["X"]), np.asarray(out["S"])


@pytest.fixture(scope="module")
def mgcv() -> Mgcv:
    try:
        session = Mgcv()
    except Exception as error:  # rpy2 raises several kinds when R or mgcv cannot be loaded
        reason = f"mgcv through rpy2 is not usable ({type(error).__name__}: {error})"
        if os.environ.get("GENGEN_REQUIRE_R") == "1":
            pytest.fail(f"GENGEN_REQUIRE_R=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return session


# ----------------------------------------------------------------------------------------------------------
# Against mgcv
# ----------------------------------------------------------------------------------------------------------

R_METHOD = {"gcv": "GCV.Cp", "reml": "REML"}


def compare_with_mgcv(mgcv: Mgcv, sets: list[DataSet], gam_method: str) -> tuple[int, list[str], list[str]]:
    """Runs the comparisons of the module docstring; returns (matches, mgcv-local-optimum names, failures)."""
    matches, local, failures = 0, [], []
    for data in sets:
        # The criterion's own optimum (no EDF cap) is what mgcv computes.
        ours = stats.gam_fit(data.y, data.control, k=data.k, gam_method=gam_method, max_edf=None)
        k = ours.k[0]
        ref = mgcv.fit(data, k, R_METHOD[gam_method])
        sd = np.std(data.y, ddof=1)
        score = ref["score"]

        at = stats.gam_fit(data.y, data.control, k=data.k, gam_method=gam_method, lam=ref["sp"])
        if abs(at.score - score) > 1e-6 * abs(score):
            failures.append(f"{data.name}: criterion at mgcv's sp {at.score!r} != mgcv's {score!r}")
        if np.max(np.abs(at.fitted - ref["fitted"])) > 1e-6 * sd or abs(at.edf - ref["edf"]) > 1e-5:
            failures.append(f"{data.name}: fit at mgcv's sp differs from mgcv's")

        if ours.score > score + 1e-8 * abs(score):
            failures.append(f"{data.name}: optimum {ours.score!r} worse than mgcv's {score!r}")
        if abs(ours.score - score) <= 1e-6 * abs(score):
            matches += 1
            corr = np.corrcoef(ours.fitted, ref["fitted"])[0, 1]
            diff = np.max(np.abs(ours.fitted - ref["fitted"]))
            edf = abs(ours.edf - ref["edf"])
            if not (corr >= 0.9999 and diff <= 1e-3 * sd and edf <= 0.1):
                failures.append(f"{data.name}: corr {corr:.6f}, max diff {diff / sd:.2e} sd, edf diff {edf:.3f}")
        else:
            local.append(data.name)
    return matches, local, failures


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.parametrize("gam_method", ["gcv", "reml"])
def test_one_control_matches_mgcv(mgcv: Mgcv, shared_dir: Path, gam_method: str) -> None:
    sets = pythia_sets(shared_dir) + simulated_sets(40, seed=4)
    assert len(sets) >= 100
    matches, local, failures = compare_with_mgcv(mgcv, sets, gam_method)
    assert not failures, "\n".join(failures)
    assert matches >= 100, f"only {matches} of {len(sets)} data sets reached mgcv's optimum: {local}"
    if gam_method == "reml":
        # REML is smooth and nearly unimodal: mgcv's Newton iteration finds the global optimum almost always.
        assert len(local) <= 0.05 * len(sets), local


@pytest.mark.r
@pytest.mark.parametrize("gam_method", ["gcv", "reml"])
def test_two_controls_match_mgcv(mgcv: Mgcv, gam_method: str) -> None:
    sets = additive_sets(12, seed=5)
    matches, local, failures = compare_with_mgcv(mgcv, sets, gam_method)
    assert not failures, "\n".join(failures)
    assert matches >= 10, local


@pytest.mark.r
@pytest.mark.parametrize("gam_method", ["gcv", "reml"])
def test_thin_plate_matches_mgcv(mgcv: Mgcv, shared_dir: Path, gam_method: str) -> None:
    """``gam_basis="tp"`` against mgcv's default ``s(z, k = 10)``. The λ scale of a tp basis depends on its
    internal parameterisation, so fits are compared at the optimum only: the GCV score does not depend on the
    parameterisation and is compared as above; REML fits are compared on the simulated sets, where the
    criterion is unimodal."""
    sets = simulated_sets(24, seed=7)
    if gam_method == "gcv":
        sets += pythia_sets(shared_dir)[::8]
    matches = 0
    for data in sets:
        ours = stats.gam_fit(data.y, data.control, k=data.k, gam_method=gam_method, gam_basis="tp", max_edf=None)
        ref = mgcv.fit(data, ours.k[0], R_METHOD[gam_method], bs="tp")
        sd = np.std(data.y, ddof=1)
        if gam_method == "gcv":
            assert ours.score <= ref["score"] * (1 + 1e-8), data.name
            if abs(ours.score - ref["score"]) > 1e-6 * ref["score"]:
                continue
        matches += 1
        assert np.corrcoef(ours.fitted, ref["fitted"])[0, 1] >= 0.9999, data.name
        assert np.max(np.abs(ours.fitted - ref["fitted"])) <= 1e-3 * sd, data.name
        assert abs(ours.edf - ref["edf"]) <= 0.1, data.name
    assert matches >= 0.8 * len(sets)


# ----------------------------------------------------------------------------------------------------------
# Against pygam, on mgcv's basis and penalty
# ----------------------------------------------------------------------------------------------------------


class MatchedPyGAM:
    """pygam's LinearGAM solving gengen's problem: the features are the columns of mgcv's constrained ``cr``
    basis (one linear term each, plus pygam's intercept) and the penalty is λ·S for those columns."""

    def __init__(self, basis: np.ndarray, penalty: np.ndarray) -> None:
        from pygam import LinearGAM, l

        self.basis = basis
        width = basis.shape[1]
        self.penalty = np.zeros((width + 1, width + 1))
        self.penalty[:width, :width] = penalty
        terms = l(0)
        for j in range(1, width):
            terms += l(j)
        self._factory = lambda: LinearGAM(terms, fit_intercept=True, max_iter=100, tol=1e-12)

    def fit(self, y: np.ndarray, lam: float) -> tuple[np.ndarray, float, float]:
        """(fitted, EDF, GCV score with γ = 1) at smoothing parameter ``lam``."""
        import scipy.sparse

        gam = self._factory()
        scaled = scipy.sparse.csc_matrix(lam * self.penalty)
        gam._P = lambda: scaled  # the penalty pygam's PIRLS uses
        gam.fit(self.basis, y)
        gcv, _ = gam._estimate_GCV_UBRE(modelmat=gam._modelmat(self.basis), y=y, gamma=1.0)
        return gam.predict(self.basis), float(gam.statistics_["edof"]), float(gcv)


@pytest.mark.r
def test_matches_pygam_on_mgcv_basis(mgcv: Mgcv) -> None:
    pytest.importorskip("pygam")
    rng = np.random.default_rng(6)
    grid = 10.0 ** np.arange(-3.0, 7.0, 0.05)
    for i in range(4):
        n = (60, 100, 150, 80)[i]
        z = rng.uniform(0, 1, n)
        y = np.sin((3, 6, 1, 10)[i] * z) + rng.normal(0, 0.3, n)
        pygam = MatchedPyGAM(*mgcv.smooth_con(z, 10))
        sd = np.std(y, ddof=1)
        for lam in (0.01, 1.0, 100.0):
            fitted, edf, gcv = pygam.fit(y, lam)
            ours = stats.gam_fit(y, z, k=10, lam=[lam])
            assert_allclose(ours.fitted, fitted, atol=1e-6 * sd)
            assert_allclose(ours.edf, edf, rtol=1e-6)
            assert_allclose(ours.score, gcv, rtol=1e-6)
        # pygam's GCV minimum over a fine grid of λ (step 0.05 in log10) against gengen's optimum.
        scores = np.array([pygam.fit(y, lam)[2] for lam in grid])
        best = int(np.argmin(scores))
        ours = stats.gam_fit(y, z, k=10, max_edf=None)
        assert ours.score <= scores[best] * (1 + 1e-9)
        assert grid[max(best - 1, 0)] <= ours.lam[0] <= grid[min(best + 1, len(grid) - 1)]
        assert abs(ours.edf - pygam.fit(y, grid[best])[1]) < 0.1


# ----------------------------------------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------------------------------------


def test_nonlinear_truth_spurious_partial_correlation_is_removed() -> None:
    """Two OOD scores that depend on the ID score only through the same curve, plus independent noise: a
    linear control leaves the curvature in both residuals (a large, 'significant' partial correlation); the
    GAM control removes it."""
    rng = np.random.default_rng(11)
    n = 200
    steps = np.linspace(0, 1, n)
    id_score = 1 - np.exp(-4 * steps) + rng.normal(0, 0.01, n)
    ood_a = 0.2 + 0.6 * id_score**2 + rng.normal(0, 0.02, n)
    ood_b = 0.4 + 0.5 * np.exp(id_score) + rng.normal(0, 0.02, n)

    linear = stats.partial_corr(ood_a, ood_b, id_score)
    assert linear.r > 0.5 and linear.p_value < 1e-6

    residuals = stats.residualise(np.column_stack([ood_a, ood_b]), id_score, fit="gam")
    gam_r = np.corrcoef(residuals, rowvar=False)[0, 1]
    assert abs(gam_r) < 0.2
    noise_r = np.corrcoef(ood_a - 0.6 * id_score**2, ood_b - 0.5 * np.exp(id_score))[0, 1]
    assert abs(gam_r - noise_r) < 0.1

    matrix = stats.partial_corr_matrix(np.column_stack([ood_a, ood_b]), id_score, fit="gam")
    assert_allclose(matrix.r[0, 1], gam_r, atol=1e-10)


def test_large_lambda_gives_linear_residuals() -> None:
    rng = np.random.default_rng(12)
    z = rng.uniform(0, 1, 80)
    y = np.sin(4 * z) + rng.normal(0, 0.1, 80)
    linear = stats.residualise(y, z)
    residuals = [stats.gam_fit(y, z, lam=[lam]).residuals for lam in (1e2, 1e5, 1e8, 1e11)]
    distances = [np.max(np.abs(r - linear)) for r in residuals]
    assert all(a > b for a, b in itertools.pairwise(distances)), distances
    assert_allclose(residuals[-1], linear, atol=1e-7 * np.std(y))
    assert abs(stats.gam_fit(y, z, lam=[1e11]).edf - 2.0) < 1e-6


def test_residualise_is_gam_fit_residuals_and_columns_are_independent() -> None:
    rng = np.random.default_rng(13)
    z = rng.uniform(0, 1, 50)
    ys = np.column_stack([np.cos(3 * z), z**3, np.sin(9 * z)]) + rng.normal(0, 0.1, (50, 3))
    fit = stats.gam_fit(ys, z, gam_method="reml")
    assert fit.fitted.shape == ys.shape and fit.edf.shape == (3,) and fit.lam.shape == (3, 1)
    assert_allclose(fit.fitted + fit.residuals, ys, atol=1e-12)
    assert_allclose(stats.residualise(ys, z, fit=stats.Gam(method="reml")), fit.residuals, atol=1e-12)
    single = stats.gam_fit(ys[:, 1], z, gam_method="reml")
    assert_allclose(single.residuals, fit.residuals[:, 1], atol=1e-12)
    assert 2.0 <= single.edf <= 10.0


def test_k_is_lowered_when_the_control_has_few_values() -> None:
    z = np.repeat(np.arange(6.0), 5)
    y = np.sin(z) + np.random.default_rng(14).normal(0, 0.1, 30)
    assert stats.gam_fit(y, z).k == (6,)
    assert stats.gam_fit(y, z, k=4).k == (4,)


@pytest.mark.parametrize(
    ("control", "message"),
    [
        (np.ones(20), "constant"),
        (np.arange(20.0) % 2, "distinct"),
        (np.where(np.arange(20) == 3, np.nan, np.arange(20.0)), "non-finite"),
    ],
)
def test_bad_controls_are_errors(control: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stats.gam_fit(np.arange(20.0), control)


# ----------------------------------------------------------------------------------------------------------
# The cap on the effective degrees of freedom (issue 23)
# ----------------------------------------------------------------------------------------------------------

MGCV_AT_SP = """
function(z, y, k, sp) {
  b <- mgcv::gam(y ~ s(z, k = k, bs = "cr"), data = data.frame(z = z, y = y), sp = sp)
  list(edf = sum(b$edf), fitted = as.numeric(fitted(b)))
}
"""


def eleven_checkpoints(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A learning curve's ID at 11 checkpoints and two OOD sets linear in it with AR(1) 0.5 noise (gengen's
    simulated runs): on such series GCV alone spends up to 9 of the 11 degrees of freedom."""
    from gengen import _core

    idv, ood = _core.simulate_run(11, 2, "ar1", 0.5, "linear", 0.0, 0.02, 0.01, 23, seed)
    return idv, ood


def test_gam_at_11_checkpoints_keeps_its_degrees_of_freedom() -> None:
    from gengen.stats.gam import default_max_edf
    from gengen.stats.sieve import sieve_partial_corr_matrix

    cap = default_max_edf(11)
    assert cap == 1 + 11 / 4
    spent = []
    for seed in range(40):
        idv, ood = eleven_checkpoints(seed)
        free = stats.gam_fit(ood, idv, max_edf=None)
        spent.append(float(np.max(free.edf)))
        capped = stats.gam_fit(ood, idv)
        assert np.all(capped.edf <= cap + 1e-6) and capped.max_edf == cap
        assert np.array_equal(capped.capped, free.edf > cap + 1e-9)
        # Residuals are those of the fit at the returned λ (what mgcv's gam(..., sp = λ) gives).
        for j in range(2):
            at = stats.gam_fit(ood[:, j], idv, lam=capped.lam[j])
            assert_allclose(at.residuals, capped.residuals[:, j], atol=1e-12)
        if free.edf.max() > 8.5:
            result = sieve_partial_corr_matrix(ood, idv, fit="gam", n_boot=99, seed=seed)
            before = sieve_partial_corr_matrix(ood, idv, fit=stats.Gam(max_edf=None), n_boot=99, seed=seed)
            assert before.se_z[0, 1] > 1.0  # the bug: at most 1.5 degrees of freedom left to test on
            # df = n − 2 − (EDF − 1) as ppcor counts it, from the capped EDF: the sieve's se_z is at least Fisher's.
            assert 0 < result.se_z[0, 1] <= 2.0
            assert result.se_z[0, 1] >= (1 - 1e-9) / np.sqrt(11 - 2 - (cap - 1) - 1)
            assert 0 < result.p_value[0, 1] < 1 and result.ci_high[0, 1] - result.ci_low[0, 1] < 2
    assert max(spent) > 9, "the data no longer reproduce the failure"


def test_residualise_and_matrix_take_the_cap() -> None:
    idv, ood = eleven_checkpoints(3)
    capped = stats.gam_fit(ood, idv, max_edf=3.0)
    assert_allclose(stats.residualise(ood, idv, fit=stats.Gam(max_edf=3.0)), capped.residuals, atol=1e-12)
    default = stats.residualise(ood, idv, fit="gam")
    assert_allclose(default, stats.gam_fit(ood, idv).residuals, atol=1e-12)
    matrix = stats.partial_corr_matrix(ood, idv, fit=stats.Gam(max_edf=3.0))
    r = np.corrcoef(capped.residuals.T)[0, 1]
    assert_allclose(np.asarray(matrix.r)[0, 1], r, atol=1e-10)


@pytest.mark.parametrize(
    ("max_edf", "message"),
    [
        (1.5, "max_edf: must be at least 2"),
        ("many", "max_edf must"),
        (float("nan"), "max_edf must"),
        (True, "max_edf must"),
    ],
)
def test_cap_below_a_line_or_not_a_number_is_refused(max_edf: Any, message: str) -> None:
    from gengen.errors import InvalidArgumentError

    idv, ood = eleven_checkpoints(0)
    with pytest.raises(InvalidArgumentError, match=f"^{re.escape(message)}"):
        stats.gam_fit(ood, idv, max_edf=max_edf)
    with pytest.raises(InvalidArgumentError, match=f"^{re.escape(message)}"):
        stats.residualise(ood, idv, fit="gam", max_edf=max_edf)


@pytest.mark.r
def test_capped_fit_is_mgcv_at_the_returned_smoothing_parameter(mgcv: Mgcv) -> None:
    import rpy2.robjects as ro
    from rpy2.robjects import numpy2ri

    at_sp = ro.r(MGCV_AT_SP)
    converter = ro.default_converter + numpy2ri.converter
    checked = 0
    for seed in range(12):
        idv, ood = eleven_checkpoints(seed)
        for j in range(2):
            fit = stats.gam_fit(ood[:, j], idv)
            if not fit.capped:
                continue
            with converter.context():
                ref = at_sp(idv, ood[:, j], 10, float(fit.lam[0]))
            assert_allclose(fit.edf, float(np.asarray(ref["edf"]).ravel()[0]), atol=1e-6)
            assert_allclose(fit.fitted, np.asarray(ref["fitted"]).ravel(), atol=1e-8 * np.std(ood[:, j]) + 1e-12)
            assert_allclose(fit.edf, 3.75, atol=1e-6)
            checked += 1
    assert checked >= 5
