package graphql

// gqlgen runs through `go run` at the version pinned in go.mod, so
// regenerating needs no tool installed on the machine.
//go:generate go run github.com/99designs/gqlgen generate --config gqlgen.yml
