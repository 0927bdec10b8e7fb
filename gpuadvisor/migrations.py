"""The measurement store's schema, as literal SQL frozen when each migration was written.

Migration N brings a store from schema version N-1 to N (`PRAGMA user_version`). Append a
new migration for a new table or column; never edit one already released: stores made by it
exist. tests/test_store.py checks that what the migrations build matches the column
dictionaries of gpuadvisor/store.py, which the readers and writers use.
"""

# The SQL stays byte for byte what the stores it made recorded, long lines and all.
# ruff: noqa: E501

MIGRATIONS: list[str] = [
    # 1: the measurement tables, append-only, and their indexes.
    """\
CREATE TABLE trials (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  trial_key TEXT NOT NULL,
  sweep TEXT,
  status TEXT NOT NULL,
  error TEXT,
  recorded_at TEXT NOT NULL,
  source TEXT NOT NULL,
  provider TEXT,
  region TEXT,
  zone TEXT,
  instance_type TEXT,
  gpu_type TEXT,
  gpus_per_node INTEGER,
  nodes INTEGER,
  sync TEXT,
  ps_count INTEGER,
  spot INTEGER,
  price_per_node_hour REAL,
  model TEXT,
  batch_per_gpu INTEGER,
  precision TEXT,
  image_size INTEGER,
  seq_len INTEGER,
  throughput REAL,
  throughput_lo REAL,
  throughput_hi REAL,
  step_time_mean REAL,
  step_time_median REAL,
  step_time_p95 REAL,
  steps_measured INTEGER,
  warmup_steps INTEGER,
  stable INTEGER,
  peak_memory_bytes INTEGER,
  time_to_first_step REAL,
  checkpoint_save_s REAL,
  checkpoint_restore_s REAL,
  checkpoint_bytes INTEGER,
  software TEXT,
  extra TEXT
);
CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER trials_no_delete BEFORE DELETE ON trials BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TABLE revocations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  trial_id INTEGER NOT NULL REFERENCES trials(id),
  node INTEGER,
  cause TEXT,
  at_seconds REAL,
  notice_s REAL,
  detect_s REAL,
  rendezvous_s REAL,
  restore_s REAL,
  first_step_after_s REAL,
  steps_lost INTEGER,
  replacement_ready_s REAL,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER revocations_no_update BEFORE UPDATE ON revocations BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER revocations_no_delete BEFORE DELETE ON revocations BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TABLE startups (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  trial_id INTEGER REFERENCES trials(id),
  node INTEGER,
  provider TEXT,
  region TEXT,
  zone TEXT,
  instance_type TEXT,
  gpu_type TEXT,
  spot INTEGER,
  provisioning_s REAL,
  staging_s REAL,
  booting_s REAL,
  first_step_s REAL,
  recorded_at TEXT,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER startups_no_update BEFORE UPDATE ON startups BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER startups_no_delete BEFORE DELETE ON startups BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TABLE checkpoints (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  trial_id INTEGER REFERENCES trials(id),
  model TEXT,
  params INTEGER,
  bytes INTEGER,
  target TEXT,
  save_s REAL,
  restore_s REAL,
  recorded_at TEXT,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TABLE models (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  model TEXT NOT NULL,
  params INTEGER,
  flops_per_sample REAL,
  gradient_bytes INTEGER,
  activation_bytes REAL,
  recorded_at TEXT,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER models_no_update BEFORE UPDATE ON models BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER models_no_delete BEFORE DELETE ON models BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TABLE lifetimes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  provider TEXT,
  region TEXT,
  gpu_type TEXT,
  spot INTEGER,
  lifetime_s REAL,
  revoked INTEGER,
  recorded_at TEXT,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER lifetimes_no_update BEFORE UPDATE ON lifetimes BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER lifetimes_no_delete BEFORE DELETE ON lifetimes BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE INDEX trials_by_key ON trials(sweep, trial_key, status);
CREATE INDEX revocations_by_trial ON revocations(trial_id);""",
    # 2: accuracy against training step (CM-DARE's chief-rejoin runs and baselines).
    """\
CREATE TABLE accuracy_curves (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run TEXT NOT NULL,
  event TEXT,
  revoked_at_step INTEGER,
  step INTEGER,
  wall_time REAL,
  accuracy REAL,
  model TEXT,
  gpu_type TEXT,
  recorded_at TEXT,
  source TEXT NOT NULL,
  extra TEXT
);
CREATE TRIGGER accuracy_curves_no_update BEFORE UPDATE ON accuracy_curves BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;
CREATE TRIGGER accuracy_curves_no_delete BEFORE DELETE ON accuracy_curves BEGIN SELECT RAISE(ABORT, 'the measurement store is append-only'); END;""",
    # 3: leases: which running sweep owns a trial, so that two runs of one spec on one store
    # never run the same trial. Not measurements: rows are replaced and deleted.
    """\
CREATE TABLE trial_leases (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep TEXT NOT NULL,
  trial_key TEXT NOT NULL,
  owner TEXT NOT NULL,
  host TEXT,
  pid INTEGER,
  acquired_at REAL NOT NULL,
  expires_at REAL NOT NULL
);
CREATE UNIQUE INDEX trial_leases_by_trial ON trial_leases(sweep, trial_key);""",
    # 4: the GPU memory a trial's workers peaked at (torch.cuda; NULL on CPU).
    """\
ALTER TABLE trials ADD COLUMN peak_allocated_bytes INTEGER;
ALTER TABLE trials ADD COLUMN peak_reserved_bytes INTEGER;""",
]
