-- Tags of every taggable resource (training jobs now; models, endpoint
-- configs and endpoints later), keyed by the resource's ARN. A resource's
-- tags come back in the order their keys were first added (rowid order: an
-- upsert of an existing key keeps its row).
CREATE TABLE tags (
	arn   TEXT NOT NULL COLLATE NOCASE,
	key   TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (arn, key)
);

-- Jobs stored before this table kept their tags in the job's JSON.
INSERT INTO tags (arn, key, value)
	SELECT json_extract(j.body, '$.TrainingJobArn'), json_extract(t.value, '$.Key'),
	       coalesce(json_extract(t.value, '$.Value'), '')
	FROM training_jobs AS j, json_each(j.body, '$.Tags') AS t
	WHERE json_extract(j.body, '$.TrainingJobArn') IS NOT NULL AND json_extract(t.value, '$.Key') IS NOT NULL
	ORDER BY j.rowid, t.key
	ON CONFLICT (arn, key) DO UPDATE SET value = excluded.value;
