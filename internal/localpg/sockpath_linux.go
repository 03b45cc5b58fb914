package localpg

// maxSocketPath is the longest socket path Linux takes: sun_path is 108
// bytes, one of them for the terminating NUL.
const maxSocketPath = 107
