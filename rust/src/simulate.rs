//! Simulated checkpoint trajectories and the calibration study of gengen's inference methods.
//!
//! **Model.** A run has n checkpoints at `u_t = t/(n − 1)`. The in-domain (ID) score follows a saturating
//! learning curve with a little measurement noise,
//! `ID_t = 0.3 + 0.5 (1 − e^{−5 u_t})/(1 − e^{−5}) + σ_ID ε_t`, and each of the m out-of-distribution (OOD)
//! scores is a function of it plus autocorrelated noise,
//! `OOD_{j,t} = 0.2 + b_j f(x_t) + σ e_{j,t}`, `x_t = (ID_t − 0.3)/0.5`, `b_j = 0.3/(1 + j/2)`,
//! with f linear (`x`), saturating (`(1 − e^{−4x})/(1 − e^{−4})`) or non-monotone (`4x(1 − x)`, an
//! inverted U: OOD first improves with ID, then degrades). The noise is
//! `e_j = √(1 − ρ) u_j + √ρ s`, with `u_1 … u_m` and `s` independent unit-variance stationary AR(1) series
//! of coefficient φ (`v_1 ~ N(0, 1)`, `v_t = φ v_{t−1} + √(1 − φ²) ε_t`) or random walks scaled by `1/√n`.
//! Under the null ρ = 0 the OOD noises are independent and every partial correlation of OOD scores given
//! ID is zero in the population; under the alternative they share the component s, and the correlation
//! of the noises (and of their AR(1) innovations) is ρ.
//!
//! **Study.** [`run_cell`] simulates `replicates` runs of one design and applies every inference method of
//! [`Inference`] to the pair (OOD₁, OOD₂) given ID, counting rejections at α = 0.05 and 0.01 and the
//! coverage of 95% intervals for ρ. Replicate i of cell c draws from
//! `Xoshiro256pp::stream(seed, Purpose::Simulation, c·2³² + i)` and its permutation and bootstrap seeds
//! from the same stream, so results depend on `(seed, cell)` only, never on the thread count.
//!
//! Size: ~710 lines of code (the model, its cells and the study's tally, which share private types) and ~140 of
//! tests below them (`mod tests`).

use rayon::prelude::*;

use crate::autocorr::{
    ar1_coefficient, bartlett_effective_n, centred_correlation, effective_n_test, fisher_interval,
    lagged_gam_residuals, lagged_residuals, prewhitened_pair, pyper_peterman_effective_n,
};
use crate::batch::Progress;
use crate::bootstrap::{interval, replicates, BootstrapRun, IntervalMethod};
use crate::choice::{self, Choice};
use crate::control::{Control, ControlKind};
use crate::error::{Result, StatsError};
use crate::gam::{GamOptions, GamSmoother};
use crate::matrix::{dot, Mat};
use crate::method::Method;
use crate::pcor;
use crate::permutation::{count_exceedances, PreparedRun};
use crate::rng::{default_block_length, BootstrapScheme, PermutationScheme, Purpose, Xoshiro256pp};

/// Coverage of the intervals the study checks.
pub const CI_LEVEL: f64 = 0.95;

/// The serial correlation of the OOD noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// Stationary AR(1) with coefficient φ in (−1, 1).
    Ar1 { phi: f64 },
    /// A random walk (φ = 1), scaled by 1/√n.
    RandomWalk,
}

/// The noise an option names: [`Noise`] before its coefficient is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseKind {
    Ar1,
    RandomWalk,
}

impl Choice for NoiseKind {
    const OPTION: &'static str = "noise";
    const WHAT: &'static str = "noise";
    const NAMES: &'static [(&'static str, Self)] = &[("ar1", NoiseKind::Ar1), ("rw", NoiseKind::RandomWalk)];
    const ALIASES: &'static [(&'static str, Self)] = &[("random_walk", NoiseKind::RandomWalk)];
}

impl Noise {
    /// The noise `kind`, AR(1) with coefficient `phi` (which the random walk ignores).
    pub fn new(kind: NoiseKind, phi: f64) -> Result<Self> {
        match kind {
            NoiseKind::Ar1 => {
                if !(phi.is_finite() && phi.abs() < 1.0) {
                    return Err(StatsError::invalid(
                        "phi",
                        format!("an AR(1) coefficient must lie strictly between -1 and 1, got {phi}"),
                    ));
                }
                Ok(Noise::Ar1 { phi })
            }
            NoiseKind::RandomWalk => Ok(Noise::RandomWalk),
        }
    }

    /// The AR(1) coefficient (1 for the random walk).
    pub fn phi(self) -> f64 {
        match self {
            Noise::Ar1 { phi } => phi,
            Noise::RandomWalk => 1.0,
        }
    }
}

/// The function linking OOD to ID scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Linear,
    Saturating,
    NonMonotone,
}

impl Choice for Shape {
    const OPTION: &'static str = "shape";
    const WHAT: &'static str = "shape";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("linear", Shape::Linear),
        ("saturating", Shape::Saturating),
        ("nonmonotone", Shape::NonMonotone),
    ];
    const ALIASES: &'static [(&'static str, Self)] = &[("non-monotone", Shape::NonMonotone)];
}

impl Shape {
    pub fn name(self) -> &'static str {
        choice::name(self)
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            Shape::Linear => x,
            Shape::Saturating => (1.0 - (-4.0 * x).exp()) / (1.0 - (-4.0f64).exp()),
            Shape::NonMonotone => 4.0 * x * (1.0 - x),
        }
    }
}

/// One simulation design.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrajectorySpec {
    /// Checkpoints per run.
    pub n: usize,
    /// OOD test sets per run.
    pub m: usize,
    pub noise: Noise,
    pub shape: Shape,
    /// Correlation ρ of the OOD noises, in [0, 1): 0 is the null.
    pub shared: f64,
    /// σ, the scale of the OOD noise.
    pub noise_sd: f64,
    /// σ_ID, the scale of the white measurement noise of the ID score.
    pub id_noise_sd: f64,
}

impl TrajectorySpec {
    /// The default scales (σ = 0.02, σ_ID = 0.01) for a design.
    pub fn new(n: usize, m: usize, noise: Noise, shape: Shape, shared: f64) -> Self {
        TrajectorySpec {
            n,
            m,
            noise,
            shape,
            shared,
            noise_sd: 0.02,
            id_noise_sd: 0.01,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.n < 5 {
            return Err(StatsError::invalid(
                "n",
                format!("needs at least 5 checkpoints, got {}", self.n),
            ));
        }
        if self.m < 2 {
            return Err(StatsError::invalid(
                "m",
                format!("needs at least 2 OOD test sets, got {}", self.m),
            ));
        }
        if !(self.shared.is_finite() && (0.0..1.0).contains(&self.shared)) {
            return Err(StatsError::invalid(
                "shared",
                format!("the noise correlation must lie in [0, 1), got {}", self.shared),
            ));
        }
        for (name, value) in [("noise_sd", self.noise_sd), ("id_noise_sd", self.id_noise_sd)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(StatsError::invalid(
                    name,
                    format!("must be finite and non-negative, got {value}"),
                ));
            }
        }
        if self.noise_sd == 0.0 {
            return Err(StatsError::invalid("noise_sd", "must be positive"));
        }
        if let Noise::Ar1 { phi } = self.noise {
            Noise::new(NoiseKind::Ar1, phi)?;
        }
        Ok(())
    }
}

/// One simulated run: the ID score and the m OOD scores (n × m).
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectories {
    pub id: Vec<f64>,
    pub ood: Mat,
}

/// A unit-variance noise series of length n.
fn noise_series(noise: Noise, n: usize, rng: &mut Xoshiro256pp) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    match noise {
        Noise::Ar1 { phi } => {
            let scale = (1.0 - phi * phi).sqrt();
            let mut value = rng.next_normal();
            out.push(value);
            for _ in 1..n {
                value = phi * value + scale * rng.next_normal();
                out.push(value);
            }
        }
        Noise::RandomWalk => {
            let scale = 1.0 / (n as f64).sqrt();
            let mut value = 0.0;
            for _ in 0..n {
                value += scale * rng.next_normal();
                out.push(value);
            }
        }
    }
    out
}

/// The noiseless ID learning curve at checkpoint t of n.
pub fn learning_curve(t: usize, n: usize) -> f64 {
    let u = t as f64 / (n - 1).max(1) as f64;
    0.3 + 0.5 * (1.0 - (-5.0 * u).exp()) / (1.0 - (-5.0f64).exp())
}

/// Simulates one run from `rng` (see the module documentation); `spec` must be valid.
pub fn simulate_with(spec: &TrajectorySpec, rng: &mut Xoshiro256pp) -> Trajectories {
    let n = spec.n;
    let id: Vec<f64> = (0..n)
        .map(|t| learning_curve(t, n) + spec.id_noise_sd * rng.next_normal())
        .collect();
    let shared = noise_series(spec.noise, n, rng);
    let own_weight = (1.0 - spec.shared).sqrt();
    let shared_weight = spec.shared.sqrt();
    let mut data = Vec::with_capacity(n * spec.m);
    for j in 0..spec.m {
        let own = noise_series(spec.noise, n, rng);
        let slope = 0.3 / (1.0 + 0.5 * j as f64);
        for t in 0..n {
            let x = (id[t] - 0.3) / 0.5;
            let e = own_weight * own[t] + shared_weight * shared[t];
            data.push(0.2 + slope * spec.shape.apply(x) + spec.noise_sd * e);
        }
    }
    let ood = Mat::from_col_major(n, spec.m, data).unwrap_or_else(|_| Mat::zeros(n, spec.m));
    Trajectories { id, ood }
}

/// Simulates run `index` of design `spec` under `seed`.
pub fn simulate(spec: &TrajectorySpec, seed: u64, index: u64) -> Result<Trajectories> {
    spec.validate()?;
    let mut rng = Xoshiro256pp::stream(seed, Purpose::Simulation, index);
    Ok(simulate_with(spec, &mut rng))
}

/// The inference methods compared, each applied to the partial correlation of OOD₁ and OOD₂ given ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inference {
    /// ppcor's t-test on n − 3 df, Fisher-z interval (linear control).
    TTest,
    /// Freedman–Lane permutation, free.
    PermutationFree,
    /// Freedman–Lane permutation, blocks of ⌈n^{1/3}⌉ (gengen's default block length).
    PermutationBlock,
    /// Freedman–Lane permutation, blocks of ⌈√n⌉.
    PermutationBlockSqrt,
    /// Freedman–Lane permutation, circular shifts.
    PermutationCircular,
    /// iid bootstrap percentile interval; rejects when it excludes 0.
    BootstrapIid,
    /// Moving-block bootstrap (length ⌈n^{1/3}⌉) percentile interval.
    BootstrapBlock,
    /// t-test and Fisher interval with Bartlett's AR(1) effective n.
    EffectiveNBartlett,
    /// t-test and Fisher interval with Pyper & Peterman's effective n.
    EffectiveNPyperPeterman,
    /// AR(1) prewhitening of the residuals, bias-corrected φ.
    Prewhitened,
    /// AR(1) prewhitening with the uncorrected lag-1 autocorrelation.
    PrewhitenedUncorrected,
    /// t-test on the residuals of the lagged regression on `[1, y_{t−1}, ID_t, ID_{t−1}]`.
    Lagged,
    /// t-test on GAM residuals (df n − 2 − (edf − 1)).
    GamTTest,
    /// Prewhitened test on GAM residuals.
    GamPrewhitened,
    /// Lagged regression with a smooth of each control `s(y_{t−1}) + s(ID_t) + s(ID_{t−1})`.
    GamLagged,
}

impl Inference {
    pub const ALL: [Inference; 15] = [
        Inference::TTest,
        Inference::PermutationFree,
        Inference::PermutationBlock,
        Inference::PermutationBlockSqrt,
        Inference::PermutationCircular,
        Inference::BootstrapIid,
        Inference::BootstrapBlock,
        Inference::EffectiveNBartlett,
        Inference::EffectiveNPyperPeterman,
        Inference::Prewhitened,
        Inference::PrewhitenedUncorrected,
        Inference::Lagged,
        Inference::GamTTest,
        Inference::GamPrewhitened,
        Inference::GamLagged,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Inference::TTest => "t-test",
            Inference::PermutationFree => "perm-free",
            Inference::PermutationBlock => "perm-block",
            Inference::PermutationBlockSqrt => "perm-block-sqrt",
            Inference::PermutationCircular => "perm-circular",
            Inference::BootstrapIid => "boot-iid",
            Inference::BootstrapBlock => "boot-block",
            Inference::EffectiveNBartlett => "neff-bartlett",
            Inference::EffectiveNPyperPeterman => "neff-pyper-peterman",
            Inference::Prewhitened => "prewhitened",
            Inference::PrewhitenedUncorrected => "prewhitened-uncorrected",
            Inference::Lagged => "lagged",
            Inference::GamTTest => "gam-t-test",
            Inference::GamPrewhitened => "gam-prewhitened",
            Inference::GamLagged => "gam-lagged",
        }
    }

    /// The control the method uses.
    pub fn control(self) -> ControlKind {
        match self {
            Inference::GamTTest | Inference::GamPrewhitened | Inference::GamLagged => ControlKind::Gam,
            _ => ControlKind::Linear,
        }
    }

    fn is_permutation(self) -> bool {
        matches!(
            self,
            Inference::PermutationFree
                | Inference::PermutationBlock
                | Inference::PermutationBlockSqrt
                | Inference::PermutationCircular
        )
    }

    fn is_bootstrap(self) -> bool {
        matches!(self, Inference::BootstrapIid | Inference::BootstrapBlock)
    }

    fn is_gam(self) -> bool {
        self.control() == ControlKind::Gam
    }
}

/// What the study runs besides the closed-form tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StudyOptions {
    /// Permutations per test (0 leaves the permutation methods out).
    pub n_perm: u64,
    /// Bootstrap replicates per interval (0 leaves the bootstrap methods out).
    pub n_boot: u64,
    /// Whether the GAM-control methods run.
    pub gam: bool,
    /// Basis dimension of each of the three smooths of the lagged GAM (the plain GAM uses mgcv's 10);
    /// [`crate::autocorr::LAGGED_GAM_K`] by default.
    pub gam_lagged_k: usize,
}

impl Default for StudyOptions {
    fn default() -> Self {
        StudyOptions {
            n_perm: 499,
            n_boot: 499,
            gam: true,
            gam_lagged_k: crate::autocorr::LAGGED_GAM_K,
        }
    }
}

impl StudyOptions {
    /// The methods these options run, in [`Inference::ALL`] order.
    pub fn methods(&self) -> Vec<Inference> {
        Inference::ALL
            .into_iter()
            .filter(|m| {
                !(m.is_permutation() && self.n_perm == 0
                    || m.is_bootstrap() && self.n_boot == 0
                    || m.is_gam() && !self.gam)
            })
            .collect()
    }
}

/// One method's result on one replicate.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Outcome {
    reject_05: bool,
    reject_01: bool,
    /// The 95% interval, when the method gives one.
    ci: Option<(f64, f64)>,
}

impl Outcome {
    fn from_p(p: f64, ci: Option<(f64, f64)>) -> Option<Self> {
        if !p.is_finite() {
            return None;
        }
        Some(Outcome {
            reject_05: p <= 0.05,
            reject_01: p <= 0.01,
            ci,
        })
    }
}

/// Counts for one method over the replicates of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodTally {
    pub method: Inference,
    /// Replicates on which the method produced a result.
    pub evaluated: u64,
    pub reject_05: u64,
    pub reject_01: u64,
    /// Replicates with a finite interval, how many covered ρ, and the sum of their widths.
    pub ci_evaluated: u64,
    pub covered: u64,
    pub ci_width_sum: f64,
}

impl MethodTally {
    fn new(method: Inference) -> Self {
        MethodTally {
            method,
            evaluated: 0,
            reject_05: 0,
            reject_01: 0,
            ci_evaluated: 0,
            covered: 0,
            ci_width_sum: 0.0,
        }
    }

    fn add(&mut self, outcome: &Outcome, target: f64) {
        self.evaluated += 1;
        self.reject_05 += u64::from(outcome.reject_05);
        self.reject_01 += u64::from(outcome.reject_01);
        if let Some((low, high)) = outcome.ci {
            if low.is_finite() && high.is_finite() {
                self.ci_evaluated += 1;
                self.covered += u64::from(low <= target && target <= high);
                self.ci_width_sum += high - low;
            }
        }
    }
}

/// The residual of each of the first two OOD columns on a GAM of ID, and the covariate degrees of freedom
/// the fits used (mean EDF − 1).
fn gam_residuals(id: &Mat, ood: &Mat) -> Result<(Vec<f64>, Vec<f64>, f64)> {
    let smoother = GamSmoother::new(id, &GamOptions::default(), "id")?;
    let a = smoother.fit_column(ood.col(0))?;
    let b = smoother.fit_column(ood.col(1))?;
    let k = 0.5 * (a.edf + b.edf) - 1.0;
    Ok((a.residuals, b.residuals, k))
}

/// Evaluates every method of `methods` on one simulated run.
fn evaluate(
    run: &Trajectories,
    methods: &[Inference],
    options: &StudyOptions,
    test_seed: u64,
) -> Vec<Option<Outcome>> {
    let n = run.id.len();
    let Ok(covar) = Mat::from_columns(n, &[&run.id]) else {
        return vec![None; methods.len()];
    };
    let Ok(pair) = Mat::from_columns(n, &[run.ood.col(0), run.ood.col(1)]) else {
        return vec![None; methods.len()];
    };
    let linear = pcor::unit_residuals(&pair, &covar, Method::Pearson).ok();
    let gam = if methods
        .iter()
        .any(|m| matches!(m, Inference::GamTTest | Inference::GamPrewhitened))
    {
        gam_residuals(&covar, &pair).ok()
    } else {
        None
    };
    let k = 1.0;
    methods
        .iter()
        .map(|&method| {
            if method == Inference::GamLagged {
                let (innovations, control_df) =
                    lagged_gam_residuals(&pair, &covar, Method::Pearson, options.gam_lagged_k).ok()?;
                let k_gam = 0.5 * (control_df[0] + control_df[1]);
                let r = centred_correlation(innovations.col(0), innovations.col(1));
                let n_lagged = (n - 1) as f64;
                let (_, p, _) = effective_n_test(r, n_lagged, k_gam);
                return Outcome::from_p(p, Some(fisher_interval(r, n_lagged, k_gam, CI_LEVEL)));
            }
            if method.is_gam() {
                let (a, b, k_gam) = gam.as_ref()?;
                return evaluate_gam(method, a, b, *k_gam);
            }
            let (residuals, _) = linear.as_ref()?;
            let (a, b) = (residuals.col(0), residuals.col(1));
            let r = dot(a, b).clamp(-1.0, 1.0);
            match method {
                Inference::TTest => {
                    let (_, p) = pcor::test_statistic(r, n, 1, Method::Pearson);
                    Outcome::from_p(p, Some(fisher_interval(r, n as f64, k, CI_LEVEL)))
                }
                Inference::PermutationFree
                | Inference::PermutationBlock
                | Inference::PermutationBlockSqrt
                | Inference::PermutationCircular => {
                    let scheme = match method {
                        Inference::PermutationFree => PermutationScheme::Free,
                        Inference::PermutationBlock => PermutationScheme::Block {
                            length: default_block_length(n),
                        },
                        Inference::PermutationBlockSqrt => PermutationScheme::Block {
                            length: ((n as f64).sqrt().ceil() as usize).clamp(1, n),
                        },
                        _ => PermutationScheme::Circular { mirror: false },
                    };
                    let prepared = PreparedRun::linear(&pair, &covar, Method::Pearson, scheme).ok()?;
                    let counts = count_exceedances(&prepared, test_seed, 0..options.n_perm);
                    let p = (counts.pairwise[1] as f64 + 1.0) / (counts.permutations as f64 + 1.0);
                    Outcome::from_p(p, None)
                }
                Inference::BootstrapIid | Inference::BootstrapBlock => {
                    let scheme = if method == Inference::BootstrapIid {
                        BootstrapScheme::Iid
                    } else {
                        BootstrapScheme::MovingBlock {
                            length: default_block_length(n),
                        }
                    };
                    let boot = BootstrapRun {
                        scores: pair.clone(),
                        covar: covar.clone(),
                        scheme,
                        control: Control::Linear,
                    };
                    let values: Vec<f64> =
                        replicates(&boot, Method::Pearson, test_seed ^ 0xB007, 0..options.n_boot)
                            .into_iter()
                            .map(|row| row[0])
                            .collect();
                    let (lo95, hi95, _) =
                        interval(&mut values.clone(), r, None, 0.95, IntervalMethod::Percentile);
                    let (lo99, hi99, _) =
                        interval(&mut values.clone(), r, None, 0.99, IntervalMethod::Percentile);
                    if !(lo95.is_finite() && hi95.is_finite() && lo99.is_finite() && hi99.is_finite()) {
                        return None;
                    }
                    Some(Outcome {
                        reject_05: lo95 > 0.0 || hi95 < 0.0,
                        reject_01: lo99 > 0.0 || hi99 < 0.0,
                        ci: Some((lo95, hi95)),
                    })
                }
                Inference::EffectiveNBartlett => {
                    let phi_a = ar1_coefficient(a, 1, true).ok()?;
                    let phi_b = ar1_coefficient(b, 1, true).ok()?;
                    let n_eff = bartlett_effective_n(n, phi_a, phi_b);
                    let (_, p, _) = effective_n_test(r, n_eff, k);
                    Outcome::from_p(p, Some(fisher_interval(r, n_eff, k, CI_LEVEL)))
                }
                Inference::EffectiveNPyperPeterman => {
                    let n_eff = pyper_peterman_effective_n(a, b, (n / 5).max(1)).ok()?;
                    let (_, p, _) = effective_n_test(r, n_eff, k);
                    Outcome::from_p(p, Some(fisher_interval(r, n_eff, k, CI_LEVEL)))
                }
                Inference::Prewhitened | Inference::PrewhitenedUncorrected => {
                    let corrected = method == Inference::Prewhitened;
                    let test = prewhitened_pair(a, b, k, corrected).ok()?;
                    Outcome::from_p(
                        test.p_value,
                        Some(fisher_interval(test.r, (n - 1) as f64, k, CI_LEVEL)),
                    )
                }
                Inference::Lagged => {
                    let (innovations, controls) = lagged_residuals(&pair, &covar, Method::Pearson).ok()?;
                    let ri = centred_correlation(innovations.col(0), innovations.col(1));
                    let n_lagged = (n - 1) as f64;
                    let (_, p, _) = effective_n_test(ri, n_lagged, controls as f64);
                    Outcome::from_p(p, Some(fisher_interval(ri, n_lagged, controls as f64, CI_LEVEL)))
                }
                Inference::GamTTest | Inference::GamPrewhitened | Inference::GamLagged => None,
            }
        })
        .collect()
}

fn evaluate_gam(method: Inference, a: &[f64], b: &[f64], k: f64) -> Option<Outcome> {
    let n = a.len();
    match method {
        Inference::GamTTest => {
            let r = centred_correlation(a, b);
            let (_, p, _) = effective_n_test(r, n as f64, k);
            Outcome::from_p(p, Some(fisher_interval(r, n as f64, k, CI_LEVEL)))
        }
        Inference::GamPrewhitened => {
            let test = prewhitened_pair(a, b, k, true).ok()?;
            Outcome::from_p(
                test.p_value,
                Some(fisher_interval(test.r, (n - 1) as f64, k, CI_LEVEL)),
            )
        }
        _ => None,
    }
}

/// Simulates `replicates` runs of `spec` and tallies every method the options select. `cell` numbers the
/// design so that different cells draw different random numbers under one seed.
pub fn run_cell(
    spec: &TrajectorySpec,
    options: &StudyOptions,
    replicates: u64,
    seed: u64,
    cell: u32,
) -> Result<Vec<MethodTally>> {
    let mut tallies = start_cell(spec, options, replicates)?;
    tally_replicates(spec, options, 0..replicates, seed, cell, &mut tallies);
    Ok(tallies)
}

/// Replicates of a calibration cell simulated between two calls of `progress` (a cell can run for minutes).
pub const CELL_SLICE: u64 = 256;

/// One cell of the calibration study: `replicates` simulated runs tallied per method, in slices of
/// [`CELL_SLICE`] replicates with `progress` called after each (the binding checks for Ctrl-C there).
pub fn calibration_cell<E: From<StatsError>>(
    spec: &TrajectorySpec,
    options: &StudyOptions,
    replicates: u64,
    seed: u64,
    cell: u32,
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<MethodTally>, E> {
    let mut tallies = start_cell(spec, options, replicates)?;
    let mut start = 0;
    while start < replicates {
        let end = (start + CELL_SLICE).min(replicates);
        tally_replicates(spec, options, start..end, seed, cell, &mut tallies);
        progress()?;
        start = end;
    }
    Ok(tallies)
}

/// Checks a cell's design and returns its empty tallies, one per method the options select; fill them with
/// [`tally_replicates`] over `0..replicates`, in order and in as many slices as wanted (the binding checks for
/// Ctrl-C between slices). Slices in order give exactly the tallies of [`run_cell`].
pub fn start_cell(
    spec: &TrajectorySpec,
    options: &StudyOptions,
    replicates: u64,
) -> Result<Vec<MethodTally>> {
    spec.validate()?;
    if replicates == 0 {
        return Err(StatsError::invalid("replicates", "must be at least 1"));
    }
    if replicates > u64::from(u32::MAX) {
        return Err(StatsError::invalid(
            "replicates",
            format!("at most {} per cell, got {replicates}", u32::MAX),
        ));
    }
    Ok(options.methods().into_iter().map(MethodTally::new).collect())
}

/// Simulates the replicates `range` of a cell in parallel and adds their outcomes to `tallies` (from
/// [`start_cell`]) in replicate order.
pub fn tally_replicates(
    spec: &TrajectorySpec,
    options: &StudyOptions,
    range: std::ops::Range<u64>,
    seed: u64,
    cell: u32,
    tallies: &mut [MethodTally],
) {
    let methods: Vec<Inference> = tallies.iter().map(|t| t.method).collect();
    let outcomes: Vec<Vec<Option<Outcome>>> = range
        .into_par_iter()
        .map(|rep| {
            let index = (u64::from(cell) << 32) | rep;
            let mut rng = Xoshiro256pp::stream(seed, Purpose::Simulation, index);
            let run = simulate_with(spec, &mut rng);
            let test_seed = rng.next_u64();
            evaluate(&run, &methods, options, test_seed)
        })
        .collect();
    for row in &outcomes {
        for (tally, outcome) in tallies.iter_mut().zip(row) {
            if let Some(outcome) = outcome {
                tally.add(outcome, spec.shared);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autocorr::autocorrelation;

    fn spec(n: usize, noise: Noise, shared: f64) -> TrajectorySpec {
        TrajectorySpec::new(n, 2, noise, Shape::Linear, shared)
    }

    /// Study options with a lagged GAM of k = 4.
    fn options(n_perm: u64, n_boot: u64, gam: bool) -> StudyOptions {
        StudyOptions {
            n_perm,
            n_boot,
            gam,
            gam_lagged_k: 4,
        }
    }

    #[test]
    fn ar1_noise_has_unit_variance_and_lag1_autocorrelation_phi() {
        for phi in [0.0, 0.5, 0.9] {
            let mut rng = Xoshiro256pp::seed_from_u64(5);
            let x = noise_series(Noise::Ar1 { phi }, 50_000, &mut rng);
            let variance = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
            // sd of the lag-1 estimate ≈ √((1 − φ²)/n) ≤ 0.0045; of the variance ≈ √(2(1+φ²)/((1−φ²)n)) ≤ 0.062
            assert!((autocorrelation(&x, 1) - phi).abs() < 0.02, "phi {phi}");
            assert!((variance - 1.0).abs() < 0.25, "phi {phi}: variance {variance}");
        }
    }

    #[test]
    fn random_walk_increments_are_white_with_variance_one_over_n() {
        let n = 40_000;
        let mut rng = Xoshiro256pp::seed_from_u64(9);
        let x = noise_series(Noise::RandomWalk, n, &mut rng);
        let increments: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
        let variance = increments.iter().map(|v| v * v).sum::<f64>() / increments.len() as f64;
        assert!((variance * n as f64 - 1.0).abs() < 0.03);
        assert!(autocorrelation(&increments, 1).abs() < 0.02);
    }

    #[test]
    fn shared_component_gives_noise_correlation_rho() {
        // Linear f with σ_ID = 0 and the same ID in both columns: residuals on ID are the noises themselves
        // (up to the projection), so their correlation over a long white run estimates ρ.
        let mut spec = spec(20_000, Noise::Ar1 { phi: 0.0 }, 0.4);
        spec.id_noise_sd = 0.0;
        let run = simulate(&spec, 1, 0).unwrap();
        let covar = Mat::from_columns(spec.n, &[&run.id]).unwrap();
        let stats = pcor::partial_corr_matrix(&run.ood, &covar, Method::Pearson).unwrap();
        assert!((stats.estimate.get(0, 1) - 0.4).abs() < 0.03);
    }

    #[test]
    fn simulation_is_reproducible_and_streams_differ() {
        let spec = spec(30, Noise::Ar1 { phi: 0.5 }, 0.0);
        assert_eq!(simulate(&spec, 3, 7).unwrap(), simulate(&spec, 3, 7).unwrap());
        assert_ne!(simulate(&spec, 3, 7).unwrap(), simulate(&spec, 3, 8).unwrap());
    }

    #[test]
    fn shapes_and_invalid_designs() {
        assert_eq!(Shape::NonMonotone.apply(0.5), 1.0);
        assert!((Shape::Saturating.apply(1.0) - 1.0).abs() < 1e-15);
        assert!(simulate(&spec(4, Noise::RandomWalk, 0.0), 0, 0).is_err());
        assert!(simulate(&spec(20, Noise::RandomWalk, 1.0), 0, 0).is_err());
        assert!(Noise::new(NoiseKind::Ar1, 1.0).is_err());
        assert!(choice::parse::<NoiseKind>("garch").is_err());
        assert!(choice::parse::<Shape>("cubic").is_err());
    }

    #[test]
    fn run_cell_is_independent_of_thread_count() {
        let spec = spec(24, Noise::Ar1 { phi: 0.5 }, 0.0);
        let options = options(49, 49, false);
        let in_pool = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| run_cell(&spec, &options, 40, 11, 2).unwrap())
        };
        let one = in_pool(1);
        assert_eq!(one, in_pool(2));
        assert_eq!(one.len(), Inference::ALL.len() - 3);
        for tally in &one {
            assert_eq!(tally.evaluated, 40, "{:?}", tally.method);
        }
    }

    #[test]
    fn slices_of_replicates_tally_as_one_call() {
        // The binding tallies a cell in slices (to check for Ctrl-C between them): same numbers as one call.
        let spec = TrajectorySpec::new(30, 2, Noise::Ar1 { phi: 0.5 }, Shape::Linear, 0.3);
        let options = options(19, 19, false);
        let whole = run_cell(&spec, &options, 25, 7, 1).unwrap();
        let mut sliced = start_cell(&spec, &options, 25).unwrap();
        for range in [0..3, 3..4, 4..17, 17..25] {
            tally_replicates(&spec, &options, range, 7, 1, &mut sliced);
        }
        assert_eq!(whole, sliced);
    }

    #[test]
    fn gam_methods_run() {
        // Two replicates only: the GAM fits are slow in unoptimised test builds.
        let spec = TrajectorySpec::new(24, 2, Noise::Ar1 { phi: 0.5 }, Shape::NonMonotone, 0.0);
        let options = options(0, 0, true);
        let tallies = run_cell(&spec, &options, 2, 3, 0).unwrap();
        let gam: Vec<&MethodTally> = tallies
            .iter()
            .filter(|t| t.method.control() == ControlKind::Gam)
            .collect();
        assert_eq!(gam.len(), 3);
        for tally in gam {
            assert_eq!(tally.evaluated, 2, "{:?}", tally.method);
        }
    }

    #[test]
    fn naive_test_is_calibrated_for_white_noise_and_not_for_phi_09() {
        // 2000 replicates: the Monte Carlo sd of a rate near 0.05 is 0.0049.
        let options = StudyOptions {
            n_perm: 0,
            n_boot: 0,
            gam: false,
            gam_lagged_k: 5,
        };
        let rate = |noise: Noise, method: Inference| {
            let tallies = run_cell(&spec(50, noise, 0.0), &options, 2000, 1, 0).unwrap();
            let tally = tallies.iter().find(|t| t.method == method).unwrap();
            tally.reject_05 as f64 / tally.evaluated as f64
        };
        let white = rate(Noise::Ar1 { phi: 0.0 }, Inference::TTest);
        assert!((white - 0.05).abs() < 0.02, "{white}");
        let autocorrelated = rate(Noise::Ar1 { phi: 0.9 }, Inference::TTest);
        assert!(autocorrelated > 0.2, "{autocorrelated}");
        for method in [Inference::Prewhitened, Inference::Lagged] {
            let corrected = rate(Noise::Ar1 { phi: 0.9 }, method);
            assert!((corrected - 0.05).abs() < 0.02, "{method:?}: {corrected}");
        }
    }
}
