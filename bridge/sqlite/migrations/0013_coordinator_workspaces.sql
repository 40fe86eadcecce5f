-- Schema version 13: the names of the workspaces each coordinator has
-- (contract 8.1), a JSON array: a run whose thread picks a workspace is
-- claimed only by a coordinator that has it.
ALTER TABLE coordinators ADD COLUMN workspaces TEXT NOT NULL DEFAULT '[]';
