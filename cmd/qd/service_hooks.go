//go:build qdtesthooks

package main

import "os"

// testServiceRootEnv names a directory that qd service puts before the
// system's paths (/etc/systemd/system, /Library/LaunchDaemons), so that
// the tests of the built binary install the system service without
// touching the machine's. A build without the tag qdtesthooks ignores it.
const testServiceRootEnv = "QD_TEST_SERVICE_ROOT"

func serviceRoot() string { return os.Getenv(testServiceRootEnv) }
