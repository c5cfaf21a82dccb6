// Package capactcompat holds the tests that drive `cairn serve --compat
// capact` over GraphQL the way Capact's own Go client for Local Hub does
// (pkg/hub/client/local: the same documents, JSON over HTTP POST), against a
// dotenv-style storage backend registered the Capact way: a bare host:port
// url and a draft-07 context schema with "$id" fragments. They pin every
// error text Capact's clients and integration tests match, and run a
// TypeInstance through its whole life in that backend.
//
// The package has no code of its own; see docs/graphql.md for what the
// compatibility covers and what differs.
package capactcompat
