import { Empty } from '../../components/empty';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { isAtLeastPercent } from '../../decimal';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { SpendBar } from '../keys/spend-bar';

/** From this share of its monthly cap a key is "near" it: early enough to raise the cap before requests are refused. */
const nearPercent = 80;

/** The active keys that spent at least 80 % of their monthly cap this month, the closest first. */
export function KeysNearCapSection() {
  const { client } = useSignedIn();
  // The first 100 active keys: a workspace with more reads the rest on the Keys page.
  const state = useLoad(() => client.get('/v1/keys', { params: { query: { limit: 100, status: 'active' } } }), [client]);
  return (
    <Section title="Keys near their caps">
      <Loaded state={state} what="Loading the keys">
        {({ data }) => {
          const near = data
            .filter((key) => key.monthly_spend_cap_usd !== null && isAtLeastPercent(key.month_to_date_spend_usd, key.monthly_spend_cap_usd, nearPercent))
            // Numbers only to order the rows; which keys are near is decided exactly above.
            .sort(
              (a, b) =>
                Number(b.month_to_date_spend_usd) / Number(b.monthly_spend_cap_usd) - Number(a.month_to_date_spend_usd) / Number(a.monthly_spend_cap_usd),
            );
          return near.length === 0 ? (
            <Empty title={`No key has spent ${nearPercent}% of its cap`}>
              <p>
                Keys with a monthly cap show here once they spend {nearPercent}% of it this month; a key at its cap is refused until the month ends or the cap
                is raised.
              </p>
            </Empty>
          ) : (
            <table className="data-table">
              <thead>
                <tr>
                  <th scope="col">Key</th>
                  <th scope="col">Spend this month</th>
                </tr>
              </thead>
              <tbody>
                {near.map((key) => (
                  <tr key={key.key_id}>
                    <th scope="row">
                      <Link to={`/keys/${key.key_id}`}>{key.name}</Link> <code className="muted small">{key.hint}</code>
                    </th>
                    <td className="spend-cell">
                      <SpendBar spend={key.month_to_date_spend_usd} cap={key.monthly_spend_cap_usd} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          );
        }}
      </Loaded>
    </Section>
  );
}
