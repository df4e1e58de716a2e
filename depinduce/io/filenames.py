"""The names of the files depinduce writes into a run folder and a dataset folder, each spelled once.

Writers, readers, ``--force``/``--resume`` checks and the reports all find a file by these names, so a rename is
one edit here.  They live in :mod:`depinduce.io` (no imports) because :mod:`depinduce.io.outputs` already needs
``manifest.json`` to tell a folder depinduce made from one of the user's; every layer above may import them.
"""

from __future__ import annotations

# --- both kinds of folder
MANIFEST_FILE = "manifest.json"  # what made the folder: a run's starts and settings, a dataset's sources and files
VOCAB_FILE = "vocab.json"  # the word vocabulary (a dataset's; a run keeps the copy its model indexes)

# --- a run folder (``depinduce train --out RUN_DIR``)
CONFIG_FILE = "config.yaml"  # the resolved model and training configuration
TAGS_FILE = "tags.json"  # the tag vocabulary, for backends that read tags
MODEL_FILE = "model.pt"  # the best weights, by the run's selection metric
LAST_FILE = "last.pt"  # the latest checkpoint, what --resume continues from
METRICS_FILE = "metrics.jsonl"  # one JSON record per evaluation or train.log_every line
LOG_FILE = "train.log"  # the time-stamped log of what the run printed
SCORES_FILE = "scores.json"  # `depinduce report`'s cache of test scores, keyed by the weights' checksum
TENSORBOARD_DIR = "tensorboard"  # train.tensorboard's event files

# every file a run writes: ``--force`` removes exactly these, ``--resume`` refuses a link among them
RUN_FILES = (CONFIG_FILE, VOCAB_FILE, TAGS_FILE, MODEL_FILE, LAST_FILE, METRICS_FILE, MANIFEST_FILE, LOG_FILE)

# --- a dataset folder (``depinduce preprocess --out DATA_DIR``)
TRAIN_TXT = "train.txt"  # one sentence of normalised words a line: what the neural backends train on
DEV_TXT = "dev.txt"
TRAIN_CONLLU = "train.conllu"  # what the backends that read CoNLL-U train on (DMV's EM, supervised runs)
DEV_CONLLU = "dev.conllu"  # the gold dependencies dev is scored against
DEV_TREES = "dev.trees"  # the gold constituency trees, where the source had them (dev_uf1)
TEST_CONLLU = "test.conllu"

# the dataset files a run reads, when present; their checksums in the run's manifest tie it to its data
DATA_FILES = (TRAIN_TXT, VOCAB_FILE, DEV_TXT, DEV_CONLLU, DEV_TREES, TRAIN_CONLLU)
