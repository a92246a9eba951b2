-- CloudWatch-Logs-like storage: groups hold streams, streams hold events.
CREATE TABLE log_groups (
	id            INTEGER PRIMARY KEY,
	name          TEXT NOT NULL UNIQUE,
	creation_time INTEGER NOT NULL, -- epoch milliseconds
	stored_bytes  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE log_streams (
	id             INTEGER PRIMARY KEY,
	group_id       INTEGER NOT NULL REFERENCES log_groups (id) ON DELETE CASCADE,
	name           TEXT NOT NULL,
	creation_time  INTEGER NOT NULL,
	first_event    INTEGER,         -- NULL until the first event
	last_event     INTEGER,
	last_ingestion INTEGER,
	stored_bytes   INTEGER NOT NULL DEFAULT 0,
	UNIQUE (group_id, name)
);

-- Events are ordered by (timestamp, id) everywhere; id is the rowid, which
-- every index carries as its last column. No foreign keys here: the insert
-- path is hot and only Append writes this table, always with ids it just
-- resolved.
CREATE TABLE log_events (
	id             INTEGER PRIMARY KEY,
	group_id       INTEGER NOT NULL,
	stream_id      INTEGER NOT NULL,
	timestamp      INTEGER NOT NULL, -- epoch milliseconds, as given
	ingestion_time INTEGER NOT NULL, -- epoch milliseconds, when appended
	message        TEXT NOT NULL
);
CREATE INDEX log_events_by_stream ON log_events (stream_id, timestamp);
CREATE INDEX log_events_by_group ON log_events (group_id, timestamp);
