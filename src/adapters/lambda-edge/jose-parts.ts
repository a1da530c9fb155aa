// The two jose functions the core uses, so that the lazily loaded chunk holds only them.
export { importSPKI, jwtVerify } from "jose";
