module github.com/cairn-dev/cairn

go 1.26
