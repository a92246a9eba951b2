-- Training jobs: the full API shape as JSON plus the columns List filters
-- and sorts on. Names are unique case-insensitively, like their ARNs.
CREATE TABLE training_jobs (
	name          TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
	status        TEXT NOT NULL,
	creation_time INTEGER NOT NULL, -- epoch milliseconds
	last_modified INTEGER NOT NULL, -- epoch milliseconds
	body          TEXT NOT NULL     -- sagebox.TrainingJob as JSON
);
CREATE INDEX training_jobs_by_creation ON training_jobs (creation_time, name);
CREATE INDEX training_jobs_by_status ON training_jobs (status, name);
CREATE INDEX training_jobs_by_modified ON training_jobs (last_modified);

-- The metric time series matched in each job's logs, in arrival order.
CREATE TABLE training_job_metrics (
	id        INTEGER PRIMARY KEY,
	job       TEXT NOT NULL COLLATE NOCASE REFERENCES training_jobs (name) ON DELETE CASCADE,
	name      TEXT NOT NULL,
	value     REAL,             -- NULL stands for NaN, which SQLite cannot store
	timestamp INTEGER NOT NULL -- epoch milliseconds
);
CREATE INDEX training_job_metrics_by_job ON training_job_metrics (job, timestamp, id);
