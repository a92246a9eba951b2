-- Models, endpoint configs and endpoints: the API shape as JSON plus the
-- columns List filters and sorts on. Each kind is its own name space (the
-- SDK gives a model, its config and its endpoint one name); names are unique
-- case-insensitively, like their ARNs. Models and configs have no status
-- (the column stays empty); tags live in the tags table, keyed by ARN.
CREATE TABLE models (
	name          TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
	status        TEXT NOT NULL,
	creation_time INTEGER NOT NULL, -- epoch milliseconds
	last_modified INTEGER NOT NULL, -- epoch milliseconds
	body          TEXT NOT NULL     -- sagebox.Model as JSON
);
CREATE INDEX models_by_creation ON models (creation_time, name);

CREATE TABLE endpoint_configs (
	name          TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
	status        TEXT NOT NULL,
	creation_time INTEGER NOT NULL,
	last_modified INTEGER NOT NULL,
	body          TEXT NOT NULL     -- sagebox.EndpointConfig as JSON
);
CREATE INDEX endpoint_configs_by_creation ON endpoint_configs (creation_time, name);

CREATE TABLE endpoints (
	name          TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
	status        TEXT NOT NULL,
	creation_time INTEGER NOT NULL,
	last_modified INTEGER NOT NULL,
	body          TEXT NOT NULL     -- sagebox.Endpoint as JSON, its Internal under "_sagebox"
);
CREATE INDEX endpoints_by_creation ON endpoints (creation_time, name);
CREATE INDEX endpoints_by_status ON endpoints (status, name);
