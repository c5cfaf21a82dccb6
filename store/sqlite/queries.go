package sqlite

// Every statement with a fixed text is named here and prepared once per
// connection (see prepare): parsing costs more than running most of them.
// Queries built from filters run unprepared, with parameters all the same.

const (
	typeColumns = `path, revision, json_schema, additional_refs, rest_group, rest_version, names, printer_columns, created_at`

	qGetType      = `SELECT ` + typeColumns + ` FROM types WHERE path = ? AND revision = ?`
	qTypeMatches  = `SELECT EXISTS (SELECT 1 FROM types WHERE path = ? AND revision = ? AND json_schema IS ? AND (names IS NOT NULL) = ?)`
	qListTypesAll = `SELECT ` + typeColumns + ` FROM types ORDER BY path, revision_key DESC, revision DESC`
	qInsertType   = `INSERT INTO types (path, revision, revision_key, json_schema, additional_refs, rest_group, rest_version, names, printer_columns, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	qInsertParent = `INSERT INTO type_parents (path, revision, parent) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	// qDeleteType deletes a Type revision only while no instance has it;
	// under BEGIN IMMEDIATE no create can slip in between check and delete.
	qDeleteType = `DELETE FROM types WHERE path = ?1 AND revision = ?2
AND NOT EXISTS (SELECT 1 FROM instances WHERE type_path = ?1 AND type_revision = ?2)`
	qCountInstance = `SELECT COUNT(*) FROM instances WHERE type_path = ? AND type_revision = ?`

	// instanceSelect reads an instance with its latest resource version in
	// one row; callers append WHERE and ORDER BY.
	instanceSelect  = `SELECT ` + instanceColumns + instanceFrom
	instanceColumns = `i.id, i.type_path, i.type_revision, i.namespace, i.name, i.alias, i.annotations,
	i.backend_id, i.backend_abstract, i.locked_by, i.created_at, i.seq, i.status, i.managed_fields,
	v.resource_version, v.created_by, v.created_at, v.attributes, v.context`
	instanceFrom = `
FROM instances i JOIN resource_versions v ON v.instance_id = i.id AND v.resource_version = i.latest_rv`
	instanceOrder = ` ORDER BY i.type_path, i.type_revision_key DESC, i.type_revision DESC, i.created_at DESC, i.id`
	// nameOrder and idOrder are store.ByName's and store.ByID's: the
	// UNIQUE (type_path, namespace, name) index gives the first for one
	// type path, the primary key the second.
	nameOrder = ` ORDER BY i.namespace, i.name, i.type_path`
	idOrder   = ` ORDER BY i.id`
	// otherOrder sorts uses edges by the instance at the other end, o.
	otherOrder = ` ORDER BY o.type_path, o.type_revision_key DESC, o.type_revision DESC, o.created_at DESC, o.id`

	// An instance uses its backend without a row in uses (instances.
	// backend_id says so, and a create wrote one B-tree less, uses_to
	// less, and a statement less): every read of uses and usedBy takes
	// the rows of uses and the backend edges together. The built-in
	// backend's instance is its own backend and does not use itself; a
	// backend that is no instance (none exists in a bare store) is no
	// edge, as the join with o drops it. AddUses writes no row for an
	// instance's own backend, so the two never hold the same edge.

	qInstancesByID = instanceSelect + ` WHERE i.id IN (SELECT value FROM json_each(?))`

	// One instance (what the hub's writes and a GET read) is read with one
	// statement, which needs no read transaction for a consistent answer:
	// its labels, uses and usedBy come as JSON columns after
	// instanceColumns (NULL, NULL for a brief read, without relations).
	labelsJSON = `(SELECT json_group_object(key, value) FROM instance_labels WHERE instance_id = i.id)`
	usesJSON   = `(SELECT json_group_array(o.id` + otherOrder + `) FROM instances o WHERE o.id IN (
	SELECT to_id FROM uses WHERE from_id = i.id UNION ALL SELECT i.backend_id WHERE i.backend_id <> i.id))`
	usedByJSON = `(SELECT json_group_array(o.id` + otherOrder + `) FROM instances o WHERE o.id IN (
	SELECT from_id FROM uses WHERE to_id = i.id UNION ALL SELECT id FROM instances WHERE backend_id = i.id AND id <> i.id))`
	qOneByID      = `SELECT ` + instanceColumns + `, ` + labelsJSON + `, ` + usesJSON + `, ` + usedByJSON + instanceFrom + ` WHERE i.id = ?`
	qOneBriefByID = `SELECT ` + instanceColumns + `, ` + labelsJSON + `, NULL, NULL` + instanceFrom + ` WHERE i.id = ?`
	qOneByName    = `SELECT ` + instanceColumns + `, ` + labelsJSON + `, ` + usesJSON + `, ` + usedByJSON + instanceFrom +
		` WHERE i.type_path = ? AND i.namespace = ? AND i.name = ?`

	qListInstanceAll = instanceSelect + instanceOrder
	qLabelsOf        = `SELECT instance_id, key, value FROM instance_labels WHERE instance_id IN (SELECT value FROM json_each(?))`
	qUsesOf          = `SELECT e.from_id, e.to_id, '' FROM (
	SELECT from_id, to_id FROM uses WHERE from_id IN (SELECT value FROM json_each(?1))
	UNION ALL SELECT id, backend_id FROM instances WHERE id IN (SELECT value FROM json_each(?1)) AND backend_id <> id
) e JOIN instances o ON o.id = e.to_id` + otherOrder
	qUsedByOf = `SELECT e.to_id, e.from_id, '' FROM (
	SELECT to_id, from_id FROM uses WHERE to_id IN (SELECT value FROM json_each(?1))
	UNION ALL SELECT backend_id, id FROM instances WHERE backend_id IN (SELECT value FROM json_each(?1)) AND backend_id <> id
) e JOIN instances o ON o.id = e.from_id` + otherOrder

	qTakenInstance = `SELECT id, type_path, namespace, name FROM instances
WHERE id = ? OR (type_path = ? AND namespace = ? AND name = ?) LIMIT 1`
	// qInsertInstance stamps the new instance with the Seq of its
	// creation's change, which qRecordCreate then logs under that Seq.
	qInsertInstance = `INSERT INTO instances (id, type_path, type_revision, type_revision_key, namespace, name, alias,
	annotations, backend_id, backend_abstract, locked_by, created_at, latest_rv, status, managed_fields, seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + nextSeq + `)`
	qInsertLabel    = `INSERT INTO instance_labels (instance_id, key, value) VALUES (?, ?, ?)`
	qDeleteLabels   = `DELETE FROM instance_labels WHERE instance_id = ?`
	qSetAnnotations = `UPDATE instances SET annotations = ? WHERE id = ?`
	qSetStatus      = `UPDATE instances SET status = ? WHERE id = ?`
	qSetManaged     = `UPDATE instances SET managed_fields = ? WHERE id = ?`
	qDeleteUses     = `DELETE FROM uses WHERE from_id = ? AND to_id = ?`
	qMissing        = `SELECT j.value, '', '' FROM json_each(?) j WHERE NOT EXISTS (SELECT 1 FROM instances WHERE id = j.value) ORDER BY j.key`
	qSetLockedBy    = `UPDATE instances SET locked_by = ? WHERE id IN (SELECT value FROM json_each(?))`
	// qInsertUses writes no row for the edge to from's own backend (see
	// usesJSON) once that backend is an instance; while it is none, the
	// insert runs and its foreign key names it missing.
	qInsertUses = `INSERT INTO uses (from_id, to_id) SELECT ?1, ?2
WHERE NOT EXISTS (SELECT 1 FROM instances f WHERE f.id = ?1 AND f.backend_id = ?2 AND ?1 <> ?2
	AND EXISTS (SELECT 1 FROM instances WHERE id = ?2))
ON CONFLICT DO NOTHING`
	qInstanceExists = `SELECT EXISTS (SELECT 1 FROM instances WHERE id = ?)`
	qUsersOf        = `SELECT e.from_id, '', '' FROM (
	SELECT from_id FROM uses WHERE to_id = ?1 AND from_id <> to_id
	UNION ALL SELECT id FROM instances WHERE backend_id = ?1 AND id <> ?1
) e JOIN instances o ON o.id = e.from_id` + otherOrder
	qDeleteInstance = `DELETE FROM instances WHERE id = ?`

	versionColumns     = `resource_version, created_by, created_at, attributes, context`
	qVersions          = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = ? ORDER BY resource_version`
	qVersionsOf        = `SELECT instance_id, ` + versionColumns + ` FROM resource_versions WHERE instance_id IN (SELECT value FROM json_each(?)) ORDER BY instance_id, resource_version`
	qVersion           = `SELECT ` + versionColumns + ` FROM resource_versions WHERE instance_id = ? AND resource_version = ?`
	qLatestVersion     = `SELECT latest_rv FROM instances WHERE id = ?`
	qInsertVersion     = `INSERT INTO resource_versions (instance_id, resource_version, created_by, created_at, attributes, context) VALUES (?, ?, ?, ?, ?, ?)`
	qSetLatest         = `UPDATE instances SET latest_rv = ?1 WHERE id = ?2 AND latest_rv = ?1 - 1`
	qUnsetLatest       = `UPDATE instances SET latest_rv = ?1 - 1 WHERE id = ?2 AND latest_rv = ?1`
	qDeleteLatestAttrs = `DELETE FROM latest_attributes WHERE instance_id = ?`
	qInsertLatestAttr  = `INSERT INTO latest_attributes (instance_id, path, revision) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`

	qRecordChange = `INSERT INTO changes (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
SELECT ` + nextSeq + `, ?, id, type_path, type_revision, namespace, name, ? FROM instances WHERE id = ?`
	qSetSeq = `UPDATE instances SET seq = last_insert_rowid() WHERE id = ?`
	// nextSeq is the Seq of the next change: one past lastSeq. Every
	// insert into changes gives it (a rowid SQLite picks could reuse the
	// Seq of a pruned change).
	nextSeq = `(` + lastSeq + ` + 1)`
	// lastSeq is the newest change's Seq: the largest kept, or the pruned
	// position when that is past it (every change pruned, or the log
	// restarted). Changes are deleted by pruning alone, which moves the
	// pruned position past them, so a Seq is never given twice.
	lastSeq = `(SELECT MAX(COALESCE((SELECT MAX(seq) FROM changes), 0), through) FROM changes_pruned WHERE id = 1)`
	// qRecordCreate logs a creation from the values the instance was
	// inserted with, under the Seq qInsertInstance stamped it with (no
	// change was logged in between), instead of reading the instance back
	// and updating it as qRecordChange and qSetSeq do.
	qRecordCreate = `INSERT INTO changes (seq, kind, instance_id, type_path, type_revision, namespace, name, at)
VALUES (` + nextSeq + `, ?, ?, ?, ?, ?, ?, ?)`
	qChanges       = `SELECT seq, kind, instance_id, type_path, type_revision, namespace, name, at FROM changes WHERE seq > ? ORDER BY seq LIMIT ?`
	qPrunedThrough = `SELECT through FROM changes_pruned WHERE id = 1`
	qLastSeq       = `SELECT COALESCE(` + lastSeq + `, 0)`
	qPruneChanges  = `DELETE FROM changes WHERE seq <= ?`
	qSetPruned     = `UPDATE changes_pruned SET through = MAX(through, ?) WHERE id = 1`

	// A group commit's savepoint around each of its writes (group.go).
	qSavepoint  = `SAVEPOINT w`
	qRelease    = `RELEASE w`
	qRollbackTo = `ROLLBACK TO w`

	qValue  = `SELECT value FROM builtin_values WHERE instance_id = ? AND resource_version = ?`
	qValues = `SELECT j.key, v.value FROM json_each(?) j
JOIN builtin_values v ON v.instance_id = json_extract(j.value, '$[0]') AND v.resource_version = json_extract(j.value, '$[1]')`
	qHasValues    = `SELECT EXISTS (SELECT 1 FROM builtin_values WHERE instance_id = ?)`
	qValueLock    = `SELECT locked_by FROM builtin_locks WHERE instance_id = ?`
	qPutValue     = `INSERT INTO builtin_values (instance_id, resource_version, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	qDeleteValues = `DELETE FROM builtin_values WHERE instance_id = ?`
	qDeleteValue  = `DELETE FROM builtin_values WHERE instance_id = ? AND resource_version = ?`
	qClearLock    = `DELETE FROM builtin_locks WHERE instance_id = ?`
	qSetLock      = `INSERT INTO builtin_locks (instance_id, locked_by) VALUES (?, ?)
ON CONFLICT (instance_id) DO UPDATE SET locked_by = excluded.locked_by`
)

// readQueries run on both pools; writeQueries on the writer only.
func readQueries() []string {
	return []string{
		qGetType, qTypeMatches, qListTypesAll, qCountInstance,
		qInstancesByID, qOneByID, qOneBriefByID, qOneByName, qListInstanceAll, qLabelsOf, qUsesOf, qUsedByOf,
		qVersions, qVersionsOf, qVersion,
		qValue, qValues, qHasValues, qValueLock,
		qChanges, qPrunedThrough, qLastSeq,
	}
}

func writeQueries() []string {
	return []string{
		qInsertType, qInsertParent, qDeleteType,
		qTakenInstance, qInsertInstance, qInsertLabel, qDeleteLabels, qSetAnnotations, qMissing, qSetLockedBy,
		qInsertUses, qInstanceExists, qUsersOf, qDeleteInstance,
		qLatestVersion, qInsertVersion, qSetLatest, qUnsetLatest, qDeleteLatestAttrs, qInsertLatestAttr,
		qPutValue, qDeleteValues, qDeleteValue, qClearLock, qSetLock,
		qRecordChange, qSetSeq, qRecordCreate, qPruneChanges, qSetPruned,
		qSavepoint, qRelease, qRollbackTo,
	}
}
