"""Active learning against uniform selection, on synthetic verifiable data with an oracle labeler.

The same run as `stepwise simulate` (active_learning.simulate): both arms start from the same
seed labels and get the same label budget each round; the figure of merit is the
data-efficiency ratio, the labels uniform selection needs for the quality active learning
reached. Writes bench/results/active_learning.json and active_learning.svg beside it.

    OMP_NUM_THREADS=1 python bench/simulate_active_learning.py    # the default: about an hour on a CPU core
    OMP_NUM_THREADS=1 python bench/simulate_active_learning.py --seed 7   # another pool, test set and training seed
    python bench/simulate_active_learning.py --base 100m --pretrain-steps 2000 --train-steps 1000 \
        --rounds 8 --pool-problems 1000                           # on a GPU
"""

import argparse
import dataclasses
from pathlib import Path

from active_learning.simulate import SimulationConfig, run_and_report

RESULTS = Path(__file__).parent / "results" / "active_learning.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(SimulationConfig):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                            help=f.metadata["help"])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = vars(parser.parse_args())
    output = args.pop("output")
    print(run_and_report(SimulationConfig(**args), output))


if __name__ == "__main__":
    main()
