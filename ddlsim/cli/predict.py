"""``ddlsim predict``: simulate one configuration and report throughput and where time goes.

Flag names and values are a contract (the vocabulary of the measured-runs schema); see
``ddlsim predict --help`` for defaults. The configuration flags live in
:mod:`ddlsim.cli.config_args`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ddlsim.cli.applies import note_one_gpu_nodes, warn_inapplicable
from ddlsim.cli.config_args import add_config_arguments, predict_kwargs
from ddlsim.cli.report import format_prediction
from ddlsim.errors import ConfigError

DESCRIPTION = (
    "Simulate one data-parallel training configuration and report images/s, iteration time, "
    "scaling efficiency against 1 GPU, where the time goes, and the time-to-train without and "
    "with failures (checkpoints, restarts or elastic recovery)."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    p = sub.add_parser(
        "predict",
        help="predict throughput and scaling of one configuration",
        description=DESCRIPTION,
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``ddlsim predict``."""
    add_config_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--from-json",
        metavar="RESULT.json",
        default=None,
        help="re-run exactly the configuration recorded in a 'predict --json' output (or a "
        "timeline's): no other configuration flag with it; refused if its calibration file "
        "changed",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim predict``."""
    from ddlsim.api import predict, rerun

    if args.from_json is not None:
        _only_from_json(args)
        result = rerun(args.from_json)
    else:
        kwargs = predict_kwargs(args)
        result = predict(**kwargs)
        warn_inapplicable(kwargs, result.inputs)  # on the job as it resolved
        note_one_gpu_nodes(result.inputs.get("one_gpu_nodes"))
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_prediction(result))
    return 0


def _only_from_json(args: argparse.Namespace) -> None:
    """``--from-json`` takes the whole configuration from the file: no configuration flag."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    defaults = vars(parser.parse_args([]))
    for key, value in vars(args).items():
        exempt = ("from_json", "json", "func", "command")
        if key not in exempt and not key.startswith("_given_") and value != defaults.get(key):
            raise ConfigError(
                f"--from-json takes the whole configuration from {args.from_json}; drop "
                f"--{key.replace('_', '-')}"
            )
