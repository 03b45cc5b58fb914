// Package backend opens the queue a URL names. The URL's scheme is the only
// selection mechanism: one switch in Open maps each supported scheme to its
// backend package, and refuses the schemes of backends that were weighed
// and declined (see DecisionRecord). There is no registry and no config
// file.
//
// backend is the one package that imports the backends (pg; the bench
// aside); it hands each out as a *lease.Backend, the provider with every
// ability of its backend filled in once here, nil where the backend lacks
// one. Neither lease nor a backend may import backend, and backend holds
// no queue logic of its own. The in-memory provider
// (lease/memlease) has no scheme: it exists for tests, which construct it
// directly.
package backend
