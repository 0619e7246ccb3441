"""Each front end names an option in its own terms, from one structured error (issue 27)."""

from __future__ import annotations

from gengen.analyse.options import ANALYSIS_OPTIONS
from gengen.cli._common import user_error_message
from gengen.cli.analyse import FLAGS
from gengen.cli.run import STUDY_KEYS
from gengen.errors import GengenError


def test_analyse_names_its_flags_and_run_names_the_study_keys() -> None:
    error = GengenError(option="id_testset", problem="'idd' is not a test set")
    assert str(error) == "id_testset 'idd' is not a test set"
    assert user_error_message(error, FLAGS) == "--id 'idd' is not a test set"
    assert user_error_message(error, STUDY_KEYS) == "study.id_testset 'idd' is not a test set"
    gam = GengenError(option="gam_k", problem="must be an integer from 3 to 200, got 2", hint="or use fit linear")
    expected = "analysis.gam_k must be an integer from 3 to 200, got 2; or use fit linear"
    assert user_error_message(gam, STUDY_KEYS) == expected


def test_every_analysis_option_has_a_flag_and_a_study_key_for_run() -> None:
    names = {option.name for option in ANALYSIS_OPTIONS}
    assert names <= set(FLAGS) and names <= set(STUDY_KEYS)
    assert all(flag.startswith("--") for flag in FLAGS.values())
