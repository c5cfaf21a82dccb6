// Package deps is seed 002's dependency engine (Porter PEP 003 "Advanced
// Dependencies") for cairn stacks: the stack.yaml `dependencies` section,
// its templates, resolution of each dependency to an existing installation
// or a new one ("GetOrCreate") with sharing groups and interfaces matched
// by well-known $ids, the execution plan as a DAG, and an executor that
// runs the plan level by level through an Installer.
//
// It is pure: the catalog of stacks, the index of installations and the
// installer are interfaces the hub and the controllers implement; MemCatalog
// and Index are in-memory implementations.
package deps
