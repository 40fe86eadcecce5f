-- The names of the workspaces each coordinator has (contract 8.1), as in
-- the SQLite migrations/0013_coordinator_workspaces.sql.
ALTER TABLE coordinators ADD COLUMN workspaces text NOT NULL DEFAULT '[]';
