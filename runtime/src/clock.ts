/** The time source of the domain modules: injected, so tests can move time (erasure, expiry). */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
