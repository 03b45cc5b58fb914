package api

// sunPathSize is the size of sockaddr_un.sun_path on Linux. qd keeps one
// byte for the terminating NUL so that every client (curl, socat, C code
// using strncpy) can reach the socket too.
const sunPathSize = 108
