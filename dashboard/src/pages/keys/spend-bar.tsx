import { Money } from '../../components/money';
import { compareDecimals } from '../../decimal';

/**
 * A key's month-to-date spend against its monthly cap: the amounts as the API gives them, and a
 * bar whose width (only) is computed with numbers. The text says everything the bar shows.
 */
export function SpendBar({ spend, cap }: { spend: string; cap: string | null }) {
  if (cap === null) {
    return (
      <div className="spend">
        <Money amount={spend} /> <span className="muted">this month, no cap</span>
      </div>
    );
  }
  const reached = compareDecimals(spend, cap) >= 0;
  const capNumber = Number(cap);
  const percent = capNumber > 0 ? Math.min(100, (Number(spend) / capNumber) * 100) : 100;
  return (
    <div className={reached ? 'spend reached' : 'spend'}>
      <span>
        <Money amount={spend} /> of <Money amount={cap} />
        {reached ? <strong> · cap reached, the key is refused</strong> : <span className="muted"> · {Math.floor(percent)}%</span>}
      </span>
      <div className="spend-bar" aria-hidden="true">
        <div className="spend-bar-fill" style={{ width: `${percent}%` }} />
      </div>
    </div>
  );
}
