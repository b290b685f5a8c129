module chaosfs

go 1.23

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.28.0
	pgregory.net/rapid v1.3.0
)
