// Package stack loads, validates and renders stack packages: seed 004's
// configuration stacks. A package is stack.yaml (the installation kind, its
// parameters, vars, outputs, readiness checks and deletion priorities) and
// resources/, a kustomize base. Rendering an installation runs kustomize in
// process over an in-memory filesystem holding the package and a generated
// overlay, exactly as seed 004 describes; everything here is pure and
// offline, so `cairn render` and the stack controller share it.
package stack
