import { envPositiveInt } from '../measure/settings.js';

export const connections = 64;
/** Conversations appended to at once; a divisor of 64 keeps the connections even. */
export const conversations = envPositiveInt('BENCH_CONVERSATIONS', 16, connections);
/** Messages of the conversation the listing reads (it reads the first 100). */
export const listMessages = Math.max(envPositiveInt('BENCH_LIST_MESSAGES', 1000, 100_000), 100);
export const listLimit = 100;
export const minRatio = 0.25;
/** Appends in flight while the listed conversation is filled. */
export const fillConcurrency = 16;
/** 200 characters, the content of every appended message. */
export const content = 'The quick brown fox jumps over the lazy dog while the bench appends one more message to a conversation, '.repeat(2).slice(0, 200);
