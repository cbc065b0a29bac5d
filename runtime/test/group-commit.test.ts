import { GroupCommit } from '@switchboard/runtime/group-commit';
import { createLogger } from '@switchboard/runtime/log';
import { describe, expect, it } from 'vitest';

/** A commit the test finishes by hand: which batches started, and a way to end each. */
function manualCommits(failWhen: (items: number[]) => boolean = () => false) {
  const started: number[][] = [];
  const finishers: Array<() => void> = [];
  const commit = (items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      started.push(items);
      finishers.push(() => (failWhen(items) ? reject(new Error(`refused ${items.join(',')}`)) : resolve(items.map((item) => item * 10))));
    });
  return { started, finish: (i: number) => finishers[i](), commit };
}

const log = createLogger('group-commit-test', 'silent');
/** Lets the batcher run: a batch starts one event-loop turn after what made room for it. */
const turn = async () => {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('GroupCommit', () => {
  it('commits what arrives during a commit as the next batch, each item getting its own result', async () => {
    const commits = manualCommits();
    const group = new GroupCommit({ name: 'items', log, maxBatch: 3, commit: commits.commit });
    const first = group.submit(1);
    await turn();
    expect(commits.started).toEqual([[1]]);
    const rest = [2, 3, 4, 5].map((item) => group.submit(item));
    await turn();
    expect(commits.started).toHaveLength(1); // one transaction at a time
    commits.finish(0);
    expect(await first).toBe(10);
    await turn();
    expect(commits.started[1]).toEqual([2, 3, 4]); // at most maxBatch
    commits.finish(1);
    await turn();
    expect(commits.started[2]).toEqual([5]);
    commits.finish(2);
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50]);
  });

  it('runs up to `concurrency` transactions at once', async () => {
    const commits = manualCommits();
    const group = new GroupCommit({ name: 'items', log, maxBatch: 10, concurrency: 2, commit: commits.commit });
    const a = group.submit(1);
    await turn();
    const b = group.submit(2);
    await turn();
    const c = group.submit(3);
    await turn();
    expect(commits.started).toEqual([[1], [2]]);
    commits.finish(1);
    expect(await b).toBe(20);
    await turn();
    expect(commits.started[2]).toEqual([3]);
    commits.finish(0);
    commits.finish(2);
    expect(await Promise.all([a, c])).toEqual([10, 30]);
  });

  it('commits a failed batch item by item, so only the refused item fails', async () => {
    const commits = manualCommits((items) => items.includes(2) && items.length === 1);
    const group = new GroupCommit({
      name: 'items',
      log,
      maxBatch: 10,
      commit: async (items: number[]) => {
        if (items.length > 1 && items.includes(2)) throw new Error('the batch failed');
        const pending = commits.commit(items);
        commits.finish(commits.started.length - 1);
        return pending;
      },
    });
    const results = await Promise.allSettled([1, 2, 3].map((item) => group.submit(item)));
    expect(results.map((result) => (result.status === 'fulfilled' ? result.value : (result.reason as Error).message))).toEqual([10, 'refused 2', 30]);
  });
});
