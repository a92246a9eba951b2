package training

// The runner's own file in a host's state directory (the driver keeps its
// files beside it).
const fileTail = "tail.json" // tailState
